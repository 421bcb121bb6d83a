package tcp

import "errors"

// Errors that explain why a QP of this provider moved to StateErr (see
// QP.Err) or why a connection was refused. Test them with errors.Is.
var (
	// ErrProtocol: the peer sent a frame that is malformed or out of
	// order. The connection is closed and the QP moves to StateErr.
	ErrProtocol = errors.New("tcp: protocol violation by peer")
	// ErrAuth: the peer did not prove knowledge of the job's secret, or
	// this side could not prove it to the peer.
	ErrAuth = errors.New("tcp: peer authentication failed")
	// ErrConnLost: the connection to the peer broke (EOF, reset, keepalive
	// or user timeout) or never came up.
	ErrConnLost = errors.New("tcp: connection to peer lost")
	// ErrPeerLeft: the peer's QP left the connection in order (it was
	// reset or destroyed, as at the end of a job); it wraps under
	// ErrConnLost. Requests still outstanding fail, but nothing broke, and
	// the provider logs it only at debug level.
	ErrPeerLeft = errors.New("tcp: peer QP left the connection")
	// ErrAckTimeout: the peer acknowledged nothing within the QP's
	// Timeout × (RetryCount+1) while requests were outstanding.
	ErrAckTimeout = errors.New("tcp: peer did not acknowledge in time")
	// ErrRemote: the peer refused a request (remote access, invalid
	// request or RNR retries exceeded); the NAK's status is in the failed
	// completion.
	ErrRemote = errors.New("tcp: request refused by peer")
	// ErrResponder: this side, as responder, refused a request of the peer
	// and told it so with a NAK.
	ErrResponder = errors.New("tcp: refused a peer request")
)
