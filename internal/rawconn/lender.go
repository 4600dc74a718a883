package rawconn

// Lender lends Socket.ReadLent the buffer a read goes into, for only as
// long as the socket has something to read: a connection that waits a long
// time between messages (an idle stream) then holds no buffer while it
// waits. Lend returns a non-empty buffer; Unlend takes back the one Lend
// returned last, unused. ReadLent calls them on its own goroutine.
type Lender interface {
	Lend() []byte
	Unlend()
}
