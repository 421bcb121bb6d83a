// Package ibv is the verbs provider for RDMA hardware: RC queue pairs on
// InfiniBand and RoCE NICs (ConnectX and other commodity RNICs) through
// libibverbs, by cgo.
//
// # Building
//
// The provider is compiled only with the build tag ibverbs and cgo, with
// the libibverbs headers installed (Debian and Ubuntu: libibverbs-dev,
// rdma-core 32 or later):
//
//	go build -tags ibverbs ./...
//
// Without the tag the package holds only its pure-Go parts and Open
// returns ErrNotBuilt, so the default build needs no C library. The
// conformance suite of package verbs/verbstest runs against the provider
// with go test -tags ibverbs, and skips when the machine has no RDMA
// device with an active port; on a new cluster it is the first check.
//
// # Devices, ports and GIDs
//
// Open takes the device and port Options name, or the first active port
// of any device. OptionsFromEnv fills the Options left zero from the
// environment: RDMACELL_IB_DEVICE (a device name such as mlx5_0),
// RDMACELL_IB_PORT (a port number) and RDMACELL_IB_GID_INDEX (a GID table
// index); a value that cannot be used is an *EnvError naming the variable
// and the value. comm.OptionsFromEnv calls it for a job.
//
// QPs use one GID of the port as their source address. On InfiniBand it
// is entry 0, and QPs in one subnet are addressed by LID. On Ethernet
// (RoCE), when no index is given, Open reads the type of every GID table
// entry with ibv_query_gid_ex (the public successor of the library's
// private ibv_query_gid_type), or from
// /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index> when
// the library cannot tell, and takes a RoCEv2 entry, IPv4-mapped first,
// then global IPv6, then link-local. The debug log says which entry was
// chosen, its type, where the type came from and why. Both ends must use
// the same RoCE version; a wrong GID index is the most common cause of
// connections that time out, which is what RDMACELL_IB_GID_INDEX is for
// (show_gids, or the sysfs files above, list the table).
//
// # Paths and flow labels
//
// The cell engine spreads a peer's traffic over several QPs, the paths,
// which must take different routes through an ECMP fabric. On RoCEv2 the
// switches hash the UDP/IP 5-tuple, and the only field that differs
// between two QPs of the same pair of ports is the UDP source port. Linux
// derives it from the GRH flow label of the QP's path (mlx5, irdma and
// rxe drivers): the upper 6 of the label's 20 bits are folded by XOR onto
// the lower 14, and the result is set in the port's top two bits, giving
// 0xC000 | (fl[13:0] ^ fl[19:14]) (see UDPSourcePort). When the label is
// zero, mlx5 derives one from the two QP numbers itself (their product,
// XOR-folded to 20 bits), so QPs of one peer may collide; older kernels
// and other drivers choose the port their own way and may ignore the
// label.
//
// This package therefore gives every path QP a label: QPConfig.FlowLabel
// when set, otherwise FlowLabel of the two QP numbers, which both ends
// derive alike. A device steps a derived label's lower bits until its
// source port differs from those of its other QPs towards the same peer
// GID, so the paths of one peer never share a source port (until there
// are more than 16384 of them). The label also travels in every packet
// (in the GRH, or in the IPv6 header on RoCEv2 over IPv6), so fabrics
// that hash on it see distinct flows as well.
//
// # Connections
//
// The connection information is verbs.Endpoint: QPN, PSN (24 bits, drawn
// at each move to INIT), GID, LID and MTU, exchanged out of band by the
// bootstrap; there is no rdma_cm. The path MTU is the smaller of both
// ends' offers, each the port's active MTU capped by Options.PathMTU.
// QPConfig.Timeout is rounded up to the local ACK timeout 4.096µs × 2^t,
// MinRNRTimer up to the next RNR timer step of the InfiniBand
// specification (it is the delay this QP asks its peer to wait, so both
// ends should use the same value), and RetryCount and RNRRetry, 3-bit
// fields in ibverbs, must be 0..7. QPConfig.LocalAddr has no meaning here
// and is ignored.
//
// # Work requests and completions
//
// Regions are registered with ibv_reg_mr over memory from verbs.Alloc,
// which lies off the Go heap. Work requests are written into arrays each
// QP allocates in C memory and posted with ibv_post_send and
// ibv_post_recv, up to 64 per call (a longer chain takes several calls, in
// order, which on one RC QP is the same); completions are polled into a C
// array; no Go pointer is retained by C. Immediate data travels in
// network byte order, and WC.Imm equals the Imm posted.
//
// ibverbs returns only a 64-bit wr_id with a completion, and leaves the
// opcode of an error completion undefined. The provider puts its own
// sequence numbers in wr_id and keeps the caller's ID, opcode and length
// in a ring per queue, which also enforces MaxSendWR and MaxRecvWR
// exactly. As on the hardware, the slot of an unsignaled request is freed
// by the next completion of its queue: a sender must signal now and then.
//
// CQ.Wait polls, spins briefly, and then sleeps in poll(2) on the CQ's
// completion channel, armed with ibv_req_notify_cq, and on an eventfd of
// its own that the context's end or Close write to.
//
// The QP's state is kept in Go so that posting needs no system call. A
// failed completion moves it to ERR, as the device already did; State
// also asks the device while the QP is in RTR or RTS. QP.Close moves the
// QP to ERR and collects its flushed completions into its CQs before it
// destroys it, because ibv_destroy_qp would discard them; to know when
// the send queue is empty it posts one signaled marker, which the caller
// never sees.
//
// Posting, polling and waiting are safe for concurrent use; Modify and
// Close of one QP must not race, as the verbs package says.
package ibv
