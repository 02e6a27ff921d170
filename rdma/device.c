/* rdma/device.c: finding the device behind an address, address and route
 * resolution, and a context's protection domain, completion channel and
 * completion queue (rdma/device.h). */
#include "rdma/device.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void mcr_rdma_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int mcr_rdma_wait_cm_event(struct rdma_event_channel *ch, int timeout_ms, struct rdma_cm_event **ev)
{
    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    for (;;) {
        int n = poll(&pfd, 1, timeout_ms);
        if (n == 0)
            return -ETIMEDOUT;
        if (n < 0 && errno != EINTR)
            return -errno;
        if (n > 0) {
            if (rdma_get_cm_event(ch, ev) == 0)
                return 0;
            if (errno != EAGAIN)
                return -errno;
        }
    }
}

int mcr_rdma_addr_name(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        if (!inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host)))
            return -EAFNOSUPPORT;
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (!inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)))
            return -EAFNOSUPPORT;
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        return -EAFNOSUPPORT;
    }
    return 0;
}

int mcr_rdma_resolve(struct rdma_event_channel *ch, struct rdma_cm_id *id, const char *host,
                     uint16_t port, int timeout_ms, bool route, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV}, *ai;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0) {
        mcr_rdma_set_err(err, errlen, "%s: %s", host, gai_strerror(rc));
        return -EINVAL;
    }
    rc = rdma_resolve_addr(id, NULL, ai->ai_addr, timeout_ms) != 0 ? -errno : 0;
    freeaddrinfo(ai);
    enum rdma_cm_event_type want = RDMA_CM_EVENT_ADDR_RESOLVED;
    for (int step = 0; rc == 0 && step < (route ? 2 : 1); step++) {
        struct rdma_cm_event *ev;
        /* the CM reports its own timeout; a second more before giving up */
        rc = mcr_rdma_wait_cm_event(ch, timeout_ms + 1000, &ev);
        if (rc != 0)
            break;
        enum rdma_cm_event_type got = ev->event;
        rdma_ack_cm_event(ev);
        if (got != want) {
            mcr_rdma_set_err(err, errlen, "%s: %s", host, rdma_event_str(got));
            return -EHOSTUNREACH;
        }
        if (want == RDMA_CM_EVENT_ADDR_RESOLVED && route) {
            want = RDMA_CM_EVENT_ROUTE_RESOLVED;
            rc = rdma_resolve_route(id, timeout_ms) != 0 ? -errno : 0;
        }
    }
    if (rc != 0) {
        mcr_rdma_set_err(err, errlen, "%s: cannot resolve: %s", host, strerror(-rc));
        return -EHOSTUNREACH;
    }
    return 0;
}

/* Binds id to addr:port. 0 when that selects a device, 1 when addr is
 * not a local address (or the port is taken), else a negative errno (a
 * wildcard address selects no device). */
static int bind_local(struct rdma_cm_id *id, const char *addr, uint16_t port, char *err,
                      size_t errlen)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV | AI_PASSIVE}, *ai;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%u", port);
    int rc = getaddrinfo(addr, portstr, &hints, &ai);
    if (rc != 0) {
        mcr_rdma_set_err(err, errlen, "cannot resolve %s: %s", addr, gai_strerror(rc));
        return -EINVAL;
    }
    rc = rdma_bind_addr(id, ai->ai_addr) != 0 ? -errno : 0;
    freeaddrinfo(ai);
    if (rc != 0) {
        mcr_rdma_set_err(err, errlen, "binding %s:%u: %s", addr, port, strerror(-rc));
        return 1;
    }
    if (id->verbs == NULL) { /* a wildcard address: no device chosen */
        mcr_rdma_set_err(err, errlen, "address %s does not select an RDMA device", addr);
        return -EINVAL;
    }
    return 0;
}

int mcr_rdma_device_find(struct mcr_rdma_device *dev, struct rdma_event_channel *ch,
                         enum rdma_port_space ps, void *id_context, const char *addr, uint16_t port,
                         enum mcr_rdma_find how, int timeout_ms, char *err, size_t errlen)
{
    if (rdma_create_id(ch, &dev->id, id_context, ps) != 0) {
        mcr_rdma_set_err(err, errlen, "rdma_create_id: %s", strerror(errno));
        return -errno;
    }
    int rc = how == MCR_RDMA_FIND_RESOLVE ? 1 : bind_local(dev->id, addr, port, err, errlen);
    if (rc < 0 || (rc > 0 && how == MCR_RDMA_FIND_BIND))
        return rc < 0 ? rc : -EADDRNOTAVAIL;
    if (rc > 0) {
        /* not a local address: resolve it as a peer's, on a fresh id */
        rdma_destroy_id(dev->id);
        dev->id = NULL;
        if (rdma_create_id(ch, &dev->id, id_context, ps) != 0) {
            mcr_rdma_set_err(err, errlen, "rdma_create_id: %s", strerror(errno));
            return -errno;
        }
        char why[192] = "";
        rc = mcr_rdma_resolve(ch, dev->id, addr, port ? port : 1, timeout_ms, false, why,
                              sizeof(why));
        if (rc != 0 || dev->id->verbs == NULL) {
            mcr_rdma_set_err(err, errlen, "no RDMA device reaches %s (%s)", addr,
                             rc != 0 ? why : "no device behind the address");
            return rc != 0 ? rc : -ENODEV;
        }
    }
    dev->verbs = dev->id->verbs;
    dev->port_num = dev->id->port_num ? dev->id->port_num : 1;
    snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(dev->verbs->device));
    return 0;
}

int mcr_rdma_device_open(struct mcr_rdma_device *dev, int cq_size, void *cq_context, char *err,
                         size_t errlen)
{
    const char *what;
    if ((dev->pd = ibv_alloc_pd(dev->verbs)) == NULL) {
        what = "ibv_alloc_pd";
    } else if ((dev->comp_channel = ibv_create_comp_channel(dev->verbs)) == NULL) {
        what = "ibv_create_comp_channel";
    } else if ((dev->cq = ibv_create_cq(dev->verbs, cq_size, cq_context, dev->comp_channel, 0)) ==
               NULL) {
        what = "ibv_create_cq";
    } else {
        int flags = fcntl(dev->comp_channel->fd, F_GETFL);
        if (flags >= 0 && fcntl(dev->comp_channel->fd, F_SETFL, flags | O_NONBLOCK) == 0)
            return 0;
        what = "making the completion channel non-blocking";
    }
    mcr_rdma_set_err(err, errlen, "%s: %s: %s", dev->name[0] ? dev->name : "rdma", what,
                     strerror(errno));
    return -1;
}

void mcr_rdma_device_close(struct mcr_rdma_device *dev)
{
    if (dev->cq != NULL)
        ibv_destroy_cq(dev->cq);
    if (dev->comp_channel != NULL)
        ibv_destroy_comp_channel(dev->comp_channel);
    if (dev->pd != NULL && ibv_dealloc_pd(dev->pd) != 0)
        fprintf(stderr,
                "rdma: %s: protection domain still in use when the context was "
                "destroyed (a memory registration was not released first)\n",
                dev->name);
    if (dev->id != NULL)
        rdma_destroy_id(dev->id);
    memset(dev, 0, sizeof(*dev));
}
