package broker

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestControllerSocketBuffers checks the Control the broker gives the controller listener:
// socket.send.buffer.bytes and socket.receive.buffer.bytes land on its socket as on the
// client listeners, and -1 (the kernel's autotuning) sets nothing and is no error.
func TestControllerSocketBuffers(t *testing.T) {
	for _, tc := range []struct {
		name             string
		send, recv       int
		wantSnd, wantRcv int // 0: left to the kernel
	}{
		// Sizes the kernel's defaults are not (16 KiB and 128 KiB here), doubled when granted.
		{"sizes", 96 << 10, 80 << 10, 192 << 10, 160 << 10},
		{"autotuning", -1, -1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Broker{cfg: Config{SocketSendBuffer: tc.send, SocketReceiveBuffer: tc.recv}, logger: slog.New(slog.DiscardHandler)}
			lc := net.ListenConfig{Control: b.controllerSocketBuffers("127.0.0.1:0")}
			ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			rc, err := ln.(*net.TCPListener).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var snd, rcv int
			var serr, rerr error
			if err := rc.Control(func(fd uintptr) {
				snd, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
				rcv, rerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
			}); err != nil || serr != nil || rerr != nil {
				t.Fatalf("getsockopt: %v %v %v", err, serr, rerr)
			}
			if tc.wantSnd == 0 {
				if snd == 192<<10 || rcv == 160<<10 {
					t.Fatalf("autotuning: SO_SNDBUF %d, SO_RCVBUF %d; want the kernel's own sizes", snd, rcv)
				}
				return
			}
			if snd != tc.wantSnd || rcv != tc.wantRcv {
				t.Fatalf("SO_SNDBUF %d, SO_RCVBUF %d; want %d, %d", snd, rcv, tc.wantSnd, tc.wantRcv)
			}
		})
	}
}
