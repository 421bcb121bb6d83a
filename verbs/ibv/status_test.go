package ibv

import (
	"testing"

	"github.com/rdmacell/rdmacell/verbs"
	"github.com/stretchr/testify/require"
)

func TestStatusOf(t *testing.T) {
	tests := []struct {
		ibv  int
		want verbs.Status
		name string
	}{
		{wcSuccess, verbs.StatusSuccess, "IBV_WC_SUCCESS"},
		{wcLocLenErr, verbs.StatusLocalLength, "IBV_WC_LOC_LEN_ERR"},
		{wcLocQPOpErr, verbs.StatusFatal, "IBV_WC_LOC_QP_OP_ERR"},
		{wcLocEECOpErr, verbs.StatusFatal, "IBV_WC_LOC_EEC_OP_ERR"},
		{wcLocProtErr, verbs.StatusLocalProtection, "IBV_WC_LOC_PROT_ERR"},
		{wcWRFlushErr, verbs.StatusWRFlush, "IBV_WC_WR_FLUSH_ERR"},
		{wcMWBindErr, verbs.StatusLocalProtection, "IBV_WC_MW_BIND_ERR"},
		{wcBadRespErr, verbs.StatusFatal, "IBV_WC_BAD_RESP_ERR"},
		{wcLocAccessErr, verbs.StatusLocalProtection, "IBV_WC_LOC_ACCESS_ERR"},
		{wcRemInvReqErr, verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_INV_REQ_ERR"},
		{wcRemAccessErr, verbs.StatusRemoteAccess, "IBV_WC_REM_ACCESS_ERR"},
		{wcRemOpErr, verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_OP_ERR"},
		{wcRetryExcErr, verbs.StatusRetryExceeded, "IBV_WC_RETRY_EXC_ERR"},
		{wcRNRRetryExcErr, verbs.StatusRNRRetryExceeded, "IBV_WC_RNR_RETRY_EXC_ERR"},
		{wcLocRDDViolErr, verbs.StatusFatal, "IBV_WC_LOC_RDD_VIOL_ERR"},
		{wcRemInvRDReqErr, verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_INV_RD_REQ_ERR"},
		{wcRemAbortErr, verbs.StatusRemoteInvalidRequest, "IBV_WC_REM_ABORT_ERR"},
		{wcInvEECNErr, verbs.StatusFatal, "IBV_WC_INV_EECN_ERR"},
		{wcInvEECStateErr, verbs.StatusFatal, "IBV_WC_INV_EEC_STATE_ERR"},
		{wcFatalErr, verbs.StatusFatal, "IBV_WC_FATAL_ERR"},
		{wcRespTimeoutErr, verbs.StatusRetryExceeded, "IBV_WC_RESP_TIMEOUT_ERR"},
		{wcGeneralErr, verbs.StatusFatal, "IBV_WC_GENERAL_ERR"},
		{wcTMErr, verbs.StatusFatal, "IBV_WC_TM_ERR"},
		{wcTMRndvIncomplete, verbs.StatusFatal, "IBV_WC_TM_RNDV_INCOMPLETE"},
		{99, verbs.StatusFatal, "ibv_wc_status(99)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, statusOf(tt.ibv))
			require.Equal(t, tt.name, statusName(tt.ibv))
		})
	}
	require.Len(t, wcStatuses, len(tests)-1, "every ibv_wc_status is in the table")
}

func TestOpcodes(t *testing.T) {
	require.Equal(t, verbs.OpRecvWriteImm, recvOpcode(wcOpRecvRDMAWImm))
	require.Equal(t, verbs.OpRecv, recvOpcode(wcOpRecv))
	require.Equal(t, verbs.OpRecv, recvOpcode(0x7f), "an error completion's undefined opcode")

	for _, tt := range []struct {
		op   verbs.Opcode
		want int
		ok   bool
	}{
		{verbs.OpWrite, wrOpRDMAWrite, true},
		{verbs.OpWriteImm, wrOpRDMAWriteImm, true},
		{verbs.OpSend, wrOpSend, true},
		{verbs.OpRecv, 0, false},
		{verbs.OpRecvWriteImm, 0, false},
		{0, 0, false},
	} {
		got, ok := wrOpcode(tt.op)
		require.Equal(t, tt.ok, ok, "%v postable", tt.op)
		require.Equal(t, tt.want, got, "ibverbs opcode of %v", tt.op)
	}
}

func TestAccessFlags(t *testing.T) {
	require.Equal(t, 0, accessFlags(0))
	require.Equal(t, accessLocalWrite, accessFlags(verbs.AccessLocalWrite))
	require.Equal(t, accessLocalWrite|accessRemoteWrite, accessFlags(verbs.AccessLocalWrite|verbs.AccessRemoteWrite))
	require.Equal(t, accessLocalWrite|accessRemoteWrite|accessRemoteRead,
		accessFlags(verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead))
}

func TestQPState(t *testing.T) {
	want := map[int]verbs.QPState{
		qpsReset: verbs.StateReset, qpsInit: verbs.StateInit, qpsRTR: verbs.StateRTR,
		qpsRTS: verbs.StateRTS, qpsSQD: verbs.StateRTS, qpsSQE: verbs.StateErr, qpsErr: verbs.StateErr, 7: verbs.StateErr,
	}
	for ibv, st := range want {
		require.Equal(t, st, qpState(ibv), "ibv_qp_state %d", ibv)
	}
}
