package ibv

import (
	"strconv"

	"github.com/rdmacell/rdmacell/verbs"
)

// wcStatus is one row of the completion status table: the model's status
// for an ibv_wc_status, and the ibverbs name for logs.
type wcStatus struct {
	status verbs.Status
	name   string
}

// wcStatuses translates every ibv_wc_status into the model's statuses.
// Statuses the model has no counterpart for (reliable datagram, tag
// matching, transport faults) become StatusFatal; the log line of the
// failed completion keeps the ibverbs name and vendor syndrome.
var wcStatuses = map[int]wcStatus{
	wcSuccess:          {verbs.StatusSuccess, "IBV_WC_SUCCESS"},
	wcLocLenErr:        {verbs.StatusLocalLength, "IBV_WC_LOC_LEN_ERR"},
	wcLocQPOpErr:       {verbs.StatusFatal, "IBV_WC_LOC_QP_OP_ERR"},
	wcLocEECOpErr:      {verbs.StatusFatal, "IBV_WC_LOC_EEC_OP_ERR"},
	wcLocProtErr:       {verbs.StatusLocalProtection, "IBV_WC_LOC_PROT_ERR"},
	wcWRFlushErr:       {verbs.StatusWRFlush, "IBV_WC_WR_FLUSH_ERR"},
	wcMWBindErr:        {verbs.StatusLocalProtection, "IBV_WC_MW_BIND_ERR"},
	wcBadRespErr:       {verbs.StatusFatal, "IBV_WC_BAD_RESP_ERR"},
	wcLocAccessErr:     {verbs.StatusLocalProtection, "IBV_WC_LOC_ACCESS_ERR"},
	wcRemInvReqErr:     {verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_INV_REQ_ERR"},
	wcRemAccessErr:     {verbs.StatusRemoteAccess, "IBV_WC_REM_ACCESS_ERR"},
	wcRemOpErr:         {verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_OP_ERR"},
	wcRetryExcErr:      {verbs.StatusRetryExceeded, "IBV_WC_RETRY_EXC_ERR"},
	wcRNRRetryExcErr:   {verbs.StatusRNRRetryExceeded, "IBV_WC_RNR_RETRY_EXC_ERR"},
	wcLocRDDViolErr:    {verbs.StatusFatal, "IBV_WC_LOC_RDD_VIOL_ERR"},
	wcRemInvRDReqErr:   {verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_INV_RD_REQ_ERR"},
	wcRemAbortErr:      {verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_ABORT_ERR"},
	wcInvEECNErr:       {verbs.StatusFatal, "IBV_WC_INV_EECN_ERR"},
	wcInvEECStateErr:   {verbs.StatusFatal, "IBV_WC_INV_EEC_STATE_ERR"},
	wcFatalErr:         {verbs.StatusFatal, "IBV_WC_FATAL_ERR"},
	wcRespTimeoutErr:   {verbs.StatusRetryExceeded, "IBV_WC_RESP_TIMEOUT_ERR"},
	wcGeneralErr:       {verbs.StatusFatal, "IBV_WC_GENERAL_ERR"},
	wcTMErr:            {verbs.StatusFatal, "IBV_WC_TM_ERR"},
	wcTMRndvIncomplete: {verbs.StatusFatal, "IBV_WC_TM_RNDV_INCOMPLETE"},
}

// statusOf translates an ibv_wc_status. A status newer than this table
// is StatusFatal: it is certainly a failure, and the caller must not
// mistake it for success.
func statusOf(s int) verbs.Status {
	if r, ok := wcStatuses[s]; ok {
		return r.status
	}
	return verbs.StatusFatal
}

// statusName is the ibverbs name of s, for logs.
func statusName(s int) string {
	if r, ok := wcStatuses[s]; ok {
		return r.name
	}
	return "ibv_wc_status(" + strconv.Itoa(s) + ")"
}

// recvOpcode translates the opcode of a successful receive completion.
// An error completion's opcode is undefined in ibverbs; such a receive is
// reported as OpRecv.
func recvOpcode(op int) verbs.Opcode {
	if op == wcOpRecvRDMAWImm {
		return verbs.OpRecvWriteImm
	}
	return verbs.OpRecv
}

// wrOpcode translates the opcode of a send request; ok is false for
// opcodes the model does not post.
func wrOpcode(op verbs.Opcode) (int, bool) {
	switch op {
	case verbs.OpWrite:
		return wrOpRDMAWrite, true
	case verbs.OpWriteImm:
		return wrOpRDMAWriteImm, true
	case verbs.OpSend:
		return wrOpSend, true
	}
	return 0, false
}

// accessFlags translates region access rights into ibv_access_flags.
func accessFlags(a verbs.Access) int {
	var f int
	if a&verbs.AccessLocalWrite != 0 {
		f |= accessLocalWrite
	}
	if a&verbs.AccessRemoteWrite != 0 {
		f |= accessRemoteWrite
	}
	if a&verbs.AccessRemoteRead != 0 {
		f |= accessRemoteRead
	}
	return f
}

// qpState translates an ibv_qp_state read back from the device. SQD
// (send queue drained) still executes requests, as RTS does; SQE (send
// queue error) accepts none, as ERR.
func qpState(s int) verbs.QPState {
	switch s {
	case qpsReset:
		return verbs.StateReset
	case qpsInit:
		return verbs.StateInit
	case qpsRTR:
		return verbs.StateRTR
	case qpsRTS, qpsSQD:
		return verbs.StateRTS
	}
	return verbs.StateErr
}
