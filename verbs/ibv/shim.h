//go:build ibverbs && cgo

// Small C helpers for the cgo files of package ibv. They exist for three
// reasons: ibv_query_port is a macro over a compat prototype that cgo
// cannot call; several ibverbs structs keep fields in anonymous unions
// (imm_data, wr.rdma) that cgo cannot name; and filling a whole chain of
// work requests or a batch of completions in one C call costs one cgo
// transition instead of one per request. Every buffer these helpers read
// or write is C memory owned by the caller; none keeps a pointer after it
// returns.

#ifndef RDMACELL_IBV_SHIM_H
#define RDMACELL_IBV_SHIM_H

#include <infiniband/verbs.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

// rc_port holds the attributes of a port the package uses.
struct rc_port {
	int state;
	int link_layer;
	int active_mtu;
	int gid_tbl_len;
	int lid;
};

static inline int rc_query_port(struct ibv_context *ctx, int port, struct rc_port *out)
{
	struct ibv_port_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = ibv_query_port(ctx, (uint8_t)port, &a);
	if (rc)
		return rc;
	out->state = a.state;
	out->link_layer = a.link_layer;
	out->active_mtu = a.active_mtu;
	out->gid_tbl_len = a.gid_tbl_len;
	out->lid = a.lid;
	return 0;
}

// rc_device holds the device limits the package checks QPs against.
struct rc_device {
	int phys_port_cnt;
	int max_qp_wr;
	int max_sge;
	int max_cqe;
};

static inline int rc_query_device(struct ibv_context *ctx, struct rc_device *out)
{
	struct ibv_device_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = ibv_query_device(ctx, &a);
	if (rc)
		return rc;
	out->phys_port_cnt = a.phys_port_cnt;
	out->max_qp_wr = a.max_qp_wr;
	out->max_sge = a.max_sge;
	out->max_cqe = a.max_cqe;
	return 0;
}

// rc_query_gid reads GID entry idx of a port into gid. It returns 0 with
// *type set when the library reports the entry's type, 1 when it cannot
// (older kernels: the caller reads the type from sysfs), or an errno
// (ENODATA or EINVAL for an empty entry).
static inline int rc_query_gid(struct ibv_context *ctx, int port, int idx, uint8_t gid[16], int *type)
{
	struct ibv_gid_entry e;
	union ibv_gid g;
	int rc;

	memset(&e, 0, sizeof(e));
	rc = ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)idx, &e, 0);
	if (rc == 0) {
		memcpy(gid, e.gid.raw, 16);
		*type = (int)e.gid_type;
		return 0;
	}
	if (rc != EOPNOTSUPP && rc != ENOSYS && rc != EPROTONOSUPPORT)
		return rc;
	if (ibv_query_gid(ctx, (uint8_t)port, idx, &g))
		return errno ? errno : EINVAL;
	memcpy(gid, g.raw, 16);
	return 1;
}

static inline struct ibv_qp *rc_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
					  uint32_t max_send, uint32_t max_recv, uint32_t max_sge)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.cap.max_send_wr = max_send;
	a.cap.max_recv_wr = max_recv;
	a.cap.max_send_sge = max_sge;
	a.cap.max_recv_sge = max_sge;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	return ibv_create_qp(pd, &a);
}

static inline int rc_to_init(struct ibv_qp *qp, int port)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

// rc_rtr holds the attributes of the move to RTR.
struct rc_rtr {
	uint32_t dest_qpn;
	uint32_t rq_psn;
	uint32_t flow_label;
	int path_mtu;
	int port;
	int is_global;
	int sgid_index;
	int min_rnr_timer;
	int dlid;
	int sl;
	int hop_limit;
	int traffic_class;
	uint8_t dgid[16];
};

static inline int rc_to_rtr(struct ibv_qp *qp, const struct rc_rtr *p)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)p->path_mtu;
	a.dest_qp_num = p->dest_qpn;
	a.rq_psn = p->rq_psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = (uint8_t)p->min_rnr_timer;
	a.ah_attr.dlid = (uint16_t)p->dlid;
	a.ah_attr.sl = (uint8_t)p->sl;
	a.ah_attr.port_num = (uint8_t)p->port;
	if (p->is_global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, p->dgid, 16);
		a.ah_attr.grh.flow_label = p->flow_label;
		a.ah_attr.grh.sgid_index = (uint8_t)p->sgid_index;
		a.ah_attr.grh.hop_limit = (uint8_t)p->hop_limit;
		a.ah_attr.grh.traffic_class = (uint8_t)p->traffic_class;
	}
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static inline int rc_to_rts(struct ibv_qp *qp, uint32_t sq_psn, int timeout, int retry, int rnr_retry)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = (uint8_t)timeout;
	a.retry_cnt = (uint8_t)retry;
	a.rnr_retry = (uint8_t)rnr_retry;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

// rc_to_state moves a QP to ERR or RESET, which take no other attribute.
static inline int rc_to_state(struct ibv_qp *qp, int state)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)state;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

// rc_query_state returns the QP's state as the device sees it, or a
// negated errno.
static inline int rc_query_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc;

	rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	if (rc)
		return -rc;
	return (int)a.qp_state;
}

// rc_send describes one send request in plain fields; rc_post_send turns
// a batch of them into a linked chain of ibv_send_wr.
struct rc_send {
	uint64_t wr_id;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm; // host byte order
	uint32_t opcode;
	uint32_t flags;
	uint32_t num_sge;
};

// rc_post_send links n requests described in d, whose scatter-gather
// lists the caller wrote at sges + i*max_sge, into wrs and posts them
// with one ibv_post_send. On failure *bad is the index of the first
// request not posted.
static inline int rc_post_send(struct ibv_qp *qp, struct ibv_send_wr *wrs, const struct rc_send *d,
			       struct ibv_sge *sges, int n, int max_sge, int *bad)
{
	struct ibv_send_wr *b = NULL;
	int i, rc;

	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &wrs[i];

		w->wr_id = d[i].wr_id;
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		w->sg_list = d[i].num_sge ? &sges[(size_t)i * max_sge] : NULL;
		w->num_sge = (int)d[i].num_sge;
		w->opcode = (enum ibv_wr_opcode)d[i].opcode;
		w->send_flags = d[i].flags;
		// The wire carries immediate data in network byte order.
		w->imm_data = htobe32(d[i].imm);
		w->wr.rdma.remote_addr = d[i].remote_addr;
		w->wr.rdma.rkey = d[i].rkey;
	}
	rc = ibv_post_send(qp, wrs, &b);
	*bad = rc && b ? (int)(b - wrs) : (rc ? 0 : -1);
	return rc;
}

// rc_recv describes one receive request.
struct rc_recv {
	uint64_t wr_id;
	uint32_t num_sge;
};

static inline int rc_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wrs, const struct rc_recv *d,
			       struct ibv_sge *sges, int n, int max_sge, int *bad)
{
	struct ibv_recv_wr *b = NULL;
	int i, rc;

	for (i = 0; i < n; i++) {
		struct ibv_recv_wr *w = &wrs[i];

		w->wr_id = d[i].wr_id;
		w->next = i + 1 < n ? &wrs[i + 1] : NULL;
		w->sg_list = d[i].num_sge ? &sges[(size_t)i * max_sge] : NULL;
		w->num_sge = (int)d[i].num_sge;
	}
	rc = ibv_post_recv(qp, wrs, &b);
	*bad = rc && b ? (int)(b - wrs) : (rc ? 0 : -1);
	return rc;
}

// rc_wc is a completion in plain fields, immediate data in host order.
struct rc_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm;
	uint32_t qp_num;
	uint32_t flags;
	uint32_t vendor_err;
};

// rc_poll polls up to n completions into buf and converts them into out.
// It returns how many, or a negative value when the CQ is in error.
static inline int rc_poll(struct ibv_cq *cq, struct ibv_wc *buf, struct rc_wc *out, int n)
{
	int i, k;

	k = ibv_poll_cq(cq, n, buf);
	for (i = 0; i < k; i++) {
		out[i].wr_id = buf[i].wr_id;
		out[i].status = buf[i].status;
		out[i].opcode = buf[i].opcode;
		out[i].byte_len = buf[i].byte_len;
		out[i].imm = (buf[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(buf[i].imm_data) : 0;
		out[i].qp_num = buf[i].qp_num;
		out[i].flags = buf[i].wc_flags;
		out[i].vendor_err = buf[i].vendor_err;
	}
	return k;
}

// rc_drain_events reads every pending event of a completion channel
// whose file descriptor is non-blocking and acknowledges them, so that
// destroying the CQ never waits for an unacknowledged event. It returns
// how many it read, or a negated errno.
static inline int rc_drain_events(struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq = NULL, *last = NULL;
	void *ctx;
	int n = 0;

	for (;;) {
		if (ibv_get_cq_event(ch, &cq, &ctx)) {
			int e = errno;

			if (last)
				ibv_ack_cq_events(last, (unsigned int)n);
			return (e == EAGAIN || e == EWOULDBLOCK) ? n : -e;
		}
		last = cq;
		n++;
	}
}

#endif
