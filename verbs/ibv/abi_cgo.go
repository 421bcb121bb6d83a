//go:build ibverbs && cgo

package ibv

// #cgo LDFLAGS: -libverbs
// #include "shim.h"
import "C"

// same is a zero-length array type; [x - y]struct{}{} converts to it
// only when x equals y, so every line below fails to compile if a copy
// in abi.go differs from the libibverbs header it is built against.
type same = [0]struct{}

var (
	_ same = [wcSuccess - C.IBV_WC_SUCCESS]struct{}{}
	_ same = [wcLocLenErr - C.IBV_WC_LOC_LEN_ERR]struct{}{}
	_ same = [wcLocQPOpErr - C.IBV_WC_LOC_QP_OP_ERR]struct{}{}
	_ same = [wcLocEECOpErr - C.IBV_WC_LOC_EEC_OP_ERR]struct{}{}
	_ same = [wcLocProtErr - C.IBV_WC_LOC_PROT_ERR]struct{}{}
	_ same = [wcWRFlushErr - C.IBV_WC_WR_FLUSH_ERR]struct{}{}
	_ same = [wcMWBindErr - C.IBV_WC_MW_BIND_ERR]struct{}{}
	_ same = [wcBadRespErr - C.IBV_WC_BAD_RESP_ERR]struct{}{}
	_ same = [wcLocAccessErr - C.IBV_WC_LOC_ACCESS_ERR]struct{}{}
	_ same = [wcRemInvReqErr - C.IBV_WC_REM_INV_REQ_ERR]struct{}{}
	_ same = [wcRemAccessErr - C.IBV_WC_REM_ACCESS_ERR]struct{}{}
	_ same = [wcRemOpErr - C.IBV_WC_REM_OP_ERR]struct{}{}
	_ same = [wcRetryExcErr - C.IBV_WC_RETRY_EXC_ERR]struct{}{}
	_ same = [wcRNRRetryExcErr - C.IBV_WC_RNR_RETRY_EXC_ERR]struct{}{}
	_ same = [wcLocRDDViolErr - C.IBV_WC_LOC_RDD_VIOL_ERR]struct{}{}
	_ same = [wcRemInvRDReqErr - C.IBV_WC_REM_INV_RD_REQ_ERR]struct{}{}
	_ same = [wcRemAbortErr - C.IBV_WC_REM_ABORT_ERR]struct{}{}
	_ same = [wcInvEECNErr - C.IBV_WC_INV_EECN_ERR]struct{}{}
	_ same = [wcInvEECStateErr - C.IBV_WC_INV_EEC_STATE_ERR]struct{}{}
	_ same = [wcFatalErr - C.IBV_WC_FATAL_ERR]struct{}{}
	_ same = [wcRespTimeoutErr - C.IBV_WC_RESP_TIMEOUT_ERR]struct{}{}
	_ same = [wcGeneralErr - C.IBV_WC_GENERAL_ERR]struct{}{}
	_ same = [wcTMErr - C.IBV_WC_TM_ERR]struct{}{}
	_ same = [wcTMRndvIncomplete - C.IBV_WC_TM_RNDV_INCOMPLETE]struct{}{}

	_ same = [wcOpSend - C.IBV_WC_SEND]struct{}{}
	_ same = [wcOpRDMAWrite - C.IBV_WC_RDMA_WRITE]struct{}{}
	_ same = [wcOpRecv - C.IBV_WC_RECV]struct{}{}
	_ same = [wcOpRecvRDMAWImm - C.IBV_WC_RECV_RDMA_WITH_IMM]struct{}{}
	_ same = [wcFlagWithImm - C.IBV_WC_WITH_IMM]struct{}{}
	_ same = [wrOpRDMAWrite - C.IBV_WR_RDMA_WRITE]struct{}{}
	_ same = [wrOpRDMAWriteImm - C.IBV_WR_RDMA_WRITE_WITH_IMM]struct{}{}
	_ same = [wrOpSend - C.IBV_WR_SEND]struct{}{}
	_ same = [sendFlagSignaled - C.IBV_SEND_SIGNALED]struct{}{}
	_ same = [accessLocalWrite - C.IBV_ACCESS_LOCAL_WRITE]struct{}{}
	_ same = [accessRemoteWrite - C.IBV_ACCESS_REMOTE_WRITE]struct{}{}
	_ same = [accessRemoteRead - C.IBV_ACCESS_REMOTE_READ]struct{}{}

	_ same = [qpsReset - C.IBV_QPS_RESET]struct{}{}
	_ same = [qpsInit - C.IBV_QPS_INIT]struct{}{}
	_ same = [qpsRTR - C.IBV_QPS_RTR]struct{}{}
	_ same = [qpsRTS - C.IBV_QPS_RTS]struct{}{}
	_ same = [qpsSQD - C.IBV_QPS_SQD]struct{}{}
	_ same = [qpsSQE - C.IBV_QPS_SQE]struct{}{}
	_ same = [qpsErr - C.IBV_QPS_ERR]struct{}{}

	_ same = [mtu256 - C.IBV_MTU_256]struct{}{}
	_ same = [mtu512 - C.IBV_MTU_512]struct{}{}
	_ same = [mtu1024 - C.IBV_MTU_1024]struct{}{}
	_ same = [mtu2048 - C.IBV_MTU_2048]struct{}{}
	_ same = [mtu4096 - C.IBV_MTU_4096]struct{}{}

	_ same = [portActive - C.IBV_PORT_ACTIVE]struct{}{}
	_ same = [linkLayerUnspec - C.IBV_LINK_LAYER_UNSPECIFIED]struct{}{}
	_ same = [linkLayerInfiniBand - C.IBV_LINK_LAYER_INFINIBAND]struct{}{}
	_ same = [linkLayerEthernet - C.IBV_LINK_LAYER_ETHERNET]struct{}{}
	_ same = [gidTypeIB - C.IBV_GID_TYPE_IB]struct{}{}
	_ same = [gidTypeRoCEv1 - C.IBV_GID_TYPE_ROCE_V1]struct{}{}
	_ same = [gidTypeRoCEv2 - C.IBV_GID_TYPE_ROCE_V2]struct{}{}
)
