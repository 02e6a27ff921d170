/* rdma/device.h: what every RDMA context of the substrate opens the same
 * way: the device behind an address (found through the RDMA CM), a
 * protection domain, a completion channel and a completion queue; the
 * address and route resolution they use; and the one-line error reports
 * of their setup. Used by the RC context (ctx.c) and the UD endpoint
 * (ud_ep.c), which add their own queues and pools on top. */
#ifndef MCR_RDMA_DEVICE_H
#define MCR_RDMA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct mcr_rdma_device {
    /* creation order: */
    struct rdma_cm_id *id; /* holds the device: bound, listening or resolved */
    struct ibv_context *verbs;
    uint8_t port_num;
    char name[64];
    struct ibv_pd *pd;
    struct ibv_comp_channel *comp_channel; /* non-blocking */
    struct ibv_cq *cq;
};

/* How mcr_rdma_device_find reaches the device. */
enum mcr_rdma_find {
    MCR_RDMA_FIND_BIND, /* bind addr:port, a local address (a listener) */
    /* resolve addr as a peer's, local or not (no source address): the
     * device the route to it leaves through, the one a client sends from */
    MCR_RDMA_FIND_RESOLVE,
    /* bind addr when local, else resolve it: the device that owns a local
     * address (a context that both listens and connects), which on a host
     * with two devices need not be the one the route to it leaves through */
    MCR_RDMA_FIND_ANY,
};

/* Writes a one-line reason into err (ignored when NULL or errlen 0). */
void mcr_rdma_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Waits up to timeout_ms for the next event on ch (blocking or not).
 * 0 or a negative errno (-ETIMEDOUT). */
int mcr_rdma_wait_cm_event(struct rdma_event_channel *ch, int timeout_ms,
                           struct rdma_cm_event **ev);

/* Resolves host:port on id (whose channel is ch, with no other id's events
 * expected meanwhile), and its route when `route`, within timeout_ms each.
 * 0, or -EINVAL / -EHOSTUNREACH with a reason in err. */
int mcr_rdma_resolve(struct rdma_event_channel *ch, struct rdma_cm_id *id, const char *host,
                     uint16_t port, int timeout_ms, bool route, char *err, size_t errlen);

/* An RDMA CM address as "host:port" ("[host]:port" for IPv6): 0, or
 * -EAFNOSUPPORT for another family. */
int mcr_rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len);

/* Creates dev->id on ch (port space ps, context id_context) and makes it
 * name the device behind addr (`how`); fills verbs, port_num and name.
 * 0 or a negative errno with a reason in err; dev->id may be set either
 * way (mcr_rdma_device_close frees it). */
int mcr_rdma_device_find(struct mcr_rdma_device *dev, struct rdma_event_channel *ch,
                         enum rdma_port_space ps, void *id_context, const char *addr, uint16_t port,
                         enum mcr_rdma_find how, int timeout_ms, char *err, size_t errlen);

/* The protection domain, a non-blocking completion channel and a
 * completion queue of cq_size entries (cq_context) on the found device.
 * 0 or -1 with a reason in err. */
int mcr_rdma_device_open(struct mcr_rdma_device *dev, int cq_size, void *cq_context, char *err,
                         size_t errlen);

/* Frees what find and open made, in reverse order (what the caller made
 * in the protection domain must be gone). Leaves dev zeroed. */
void mcr_rdma_device_close(struct mcr_rdma_device *dev);

#endif
