/* t/rdma/rdma_test_nodev.c: context creation without a usable RDMA device
 * fails with one clear message and leaks nothing. On a machine without any
 * RDMA device (the build host) every address fails; inside the Soft-RoCE
 * guest, the loopback address has no RDMA device behind it while the rxe
 * address ($RXE_VM_ADDR) does. */
#include <stdlib.h>
#include <string.h>

#include "rdma/ctx.h"
#include "t/rdma/tap.h"

static void expect_failure(const char *addr)
{
    struct mcr_rdma_ctx_opts opts = {.addr = addr};
    mcr_rdma_ctx_opts_default(&opts);
    char err[256] = "untouched";
    struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(&opts, err, sizeof(err));
    tap_ok(ctx == NULL, "no context for %s", addr);
    tap_ok(err[0] != '\0' && strcmp(err, "untouched") != 0 && strchr(err, '\n') == NULL,
           "one-line reason given: %s", err);
    tap_ok(strstr(err, "RDMA") != NULL || strstr(err, "rdma") != NULL, "the reason names RDMA");
    mcr_rdma_ctx_destroy(ctx);
}

int main(void)
{
    const char *rxe_addr = getenv("RXE_VM_ADDR");
    tap_plan(rxe_addr ? 8 : 6);
    expect_failure("127.0.0.1");
    expect_failure(rxe_addr ? "127.0.0.2" : "169.254.77.1");
    if (rxe_addr) {
        struct mcr_rdma_ctx_opts opts = {.addr = rxe_addr};
        mcr_rdma_ctx_opts_default(&opts);
        char err[256] = "";
        struct mcr_rdma_ctx *ctx = mcr_rdma_ctx_create(&opts, err, sizeof(err));
        tap_ok(ctx != NULL, "context on the Soft-RoCE address %s (%s)", rxe_addr,
               ctx ? mcr_rdma_ctx_device_name(ctx) : err);
        tap_ok(ctx != NULL && strcmp(mcr_rdma_ctx_device_name(ctx),
                                     getenv("RXE_VM_DEV") ? getenv("RXE_VM_DEV") : "rxe0") == 0,
               "device is the guest's rxe device");
        mcr_rdma_ctx_destroy(ctx);
    }
    return tap_exit_status();
}
