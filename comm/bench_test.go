package comm

import (
	"fmt"
	"testing"
)

// Latency: a ping-pong between two ranks of this process; one iteration
// is a round trip.
func BenchmarkPingPong(b *testing.B) {
	for _, tr := range transports {
		for _, n := range []int{8, 4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%d", tr, n), func(b *testing.B) {
				comms := startComms(b, 2, tr, nil)
				ctx := bounded(b)
				bufs := [2][]byte{make([]byte, n), make([]byte, n)}
				done := make(chan error, 1)
				go func() {
					c := comms[1]
					for range b.N {
						if _, err := c.Recv(ctx, 0, 1, bufs[1]); err != nil {
							done <- err
							return
						}
						if err := c.Send(ctx, 0, 1, bufs[1]); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
				c := comms[0]
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := c.Send(ctx, 1, 1, bufs[0]); err != nil {
						b.Fatal(err)
					}
					if _, err := c.Recv(ctx, 1, 1, bufs[0]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// Bandwidth: one rank streams messages to another, four in flight, from
// and into memory of Alloc (zero copy) or caller memory (staged).
func BenchmarkStream(b *testing.B) {
	for _, tr := range transports {
		for _, reg := range []bool{true, false} {
			for _, n := range []int{1 << 20, 16 << 20} {
				name := "staged"
				if reg {
					name = "alloc"
				}
				b.Run(fmt.Sprintf("%s/%s/%dMiB", tr, name, n>>20), func(b *testing.B) {
					comms := startComms(b, 2, tr, nil)
					ctx := bounded(b)
					const depth = 4
					var bufs [2][depth][]byte
					for r := range 2 {
						for i := range depth {
							if reg {
								m, err := comms[r].Alloc(n)
								if err != nil {
									b.Fatal(err)
								}
								bufs[r][i] = m
							} else {
								bufs[r][i] = make([]byte, n)
							}
						}
					}
					done := make(chan error, 1)
					go func() {
						var hs [depth]*Handle
						for i := range b.N {
							k := i % depth
							if hs[k] != nil {
								if _, err := hs[k].Wait(ctx); err != nil {
									done <- err
									return
								}
							}
							h, err := comms[1].Irecv(0, 1, bufs[1][k])
							if err != nil {
								done <- err
								return
							}
							hs[k] = h
						}
						for _, h := range hs {
							if h != nil {
								if _, err := h.Wait(ctx); err != nil {
									done <- err
									return
								}
							}
						}
						done <- nil
					}()
					b.SetBytes(int64(n))
					b.ResetTimer()
					var hs [depth]*Handle
					for i := range b.N {
						k := i % depth
						if hs[k] != nil {
							if _, err := hs[k].Wait(ctx); err != nil {
								b.Fatal(err)
							}
						}
						h, err := comms[0].Isend(1, 1, bufs[0][k])
						if err != nil {
							b.Fatal(err)
						}
						hs[k] = h
					}
					if err := <-done; err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
				})
			}
		}
	}
}
