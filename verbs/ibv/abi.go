package ibv

// Values of the libibverbs enums this package translates. They are part
// of the stable ibverbs ABI; keeping a copy in pure Go lets the
// translations be unit-tested in the default build, and the cgo build
// checks at compile time that every copy equals the C definition (see
// abi_cgo.go), so they cannot drift.

// enum ibv_wc_status.
const (
	wcSuccess          = 0
	wcLocLenErr        = 1
	wcLocQPOpErr       = 2
	wcLocEECOpErr      = 3
	wcLocProtErr       = 4
	wcWRFlushErr       = 5
	wcMWBindErr        = 6
	wcBadRespErr       = 7
	wcLocAccessErr     = 8
	wcRemInvReqErr     = 9
	wcRemAccessErr     = 10
	wcRemOpErr         = 11
	wcRetryExcErr      = 12
	wcRNRRetryExcErr   = 13
	wcLocRDDViolErr    = 14
	wcRemInvRDReqErr   = 15
	wcRemAbortErr      = 16
	wcInvEECNErr       = 17
	wcInvEECStateErr   = 18
	wcFatalErr         = 19
	wcRespTimeoutErr   = 20
	wcGeneralErr       = 21
	wcTMErr            = 22
	wcTMRndvIncomplete = 23
)

// enum ibv_wc_opcode: the completion opcodes an RC QP of this package can
// produce.
const (
	wcOpSend          = 0
	wcOpRDMAWrite     = 1
	wcOpRecv          = 128
	wcOpRecvRDMAWImm  = 129
	wcFlagWithImm     = 1 << 1 // IBV_WC_WITH_IMM in enum ibv_wc_flags
	wrOpRDMAWrite     = 0      // enum ibv_wr_opcode
	wrOpRDMAWriteImm  = 1
	wrOpSend          = 2
	sendFlagSignaled  = 1 << 1 // IBV_SEND_SIGNALED in enum ibv_send_flags
	accessLocalWrite  = 1      // enum ibv_access_flags
	accessRemoteWrite = 1 << 1
	accessRemoteRead  = 1 << 2
)

// enum ibv_qp_state.
const (
	qpsReset = 0
	qpsInit  = 1
	qpsRTR   = 2
	qpsRTS   = 3
	qpsSQD   = 4
	qpsSQE   = 5
	qpsErr   = 6
)

// enum ibv_mtu.
const (
	mtu256  = 1
	mtu512  = 2
	mtu1024 = 3
	mtu2048 = 4
	mtu4096 = 5
)

// enum ibv_port_state, enum ibv_link_layer values (IBV_LINK_LAYER_*) and
// enum ibv_gid_type.
const (
	portActive          = 4
	linkLayerUnspec     = 0
	linkLayerInfiniBand = 1
	linkLayerEthernet   = 2
	gidTypeIB           = 0
	gidTypeRoCEv1       = 1
	gidTypeRoCEv2       = 2
)
