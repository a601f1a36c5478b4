package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"google.golang.org/grpc"

	namesrvv1 "github.com/apache/rocketmq-namesrv-grpc/examples/clients/go/gen/namesrv/v1"
)

func runWatch(args []string) int {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	var topics stringList
	fs.Var(&topics, "topic", "topic to watch (repeat for more; at least one, none empty)")
	zone := fs.String("zone", "", "zone mode: only the brokers of this zone (and those without a master)")
	maxBackoffMs := fs.Int64("max-backoff-ms", 5000, "longest wait between reconnect attempts, milliseconds")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(topics) == 0 || slices.Contains(topics, "") { // as route: an empty --topic is a missing one
		fmt.Fprintln(os.Stderr, "watch: --topic is required")
		return 2
	}
	cc, err := conn.dial()
	if err != nil {
		fmt.Fprintln(os.Stderr, "watch:", err)
		return 2
	}
	defer cc.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := namesrvv1.NewNameServerServiceClient(cc)
	backoff := newBackoff(100*time.Millisecond, time.Duration(*maxBackoffMs)*time.Millisecond)
	for ctx.Err() == nil {
		err := watchOnce(ctx, client, &namesrvv1.WatchTopicRoutesRequest{Topics: topics, ZoneName: *zone}, backoff)
		if ctx.Err() != nil {
			break
		}
		delay := backoff.next()
		fmt.Printf("disconnected %s retry_in_ms=%d\n", describeError(err), delay.Milliseconds())
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	return 0
}

// watchOnce subscribes and prints every message until the stream fails. The first message of a
// stream is the whole state of the watched topics: after a reconnect (the NameServer may have
// restarted, and revisions do not survive a restart) it replaces whatever was known before.
func watchOnce(ctx context.Context, client namesrvv1.NameServerServiceClient, req *namesrvv1.WatchTopicRoutesRequest, b *retryBackoff) error {
	// WaitForReady: while the NameServer is down the call waits for the channel to connect again.
	stream, err := client.WatchTopicRoutes(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		kind := "update"
		if first {
			kind = "snapshot" // the whole new state, not a change of the previous stream's
			b.reset()
		}
		fmt.Printf("%s revision=%d topics=%d\n", kind, msg.GetRevision(), len(msg.GetChanges()))
		for _, change := range msg.GetChanges() {
			line := "removed=true"
			if !change.GetRemoved() {
				line = routeSummary(change.GetRoute())
			}
			fmt.Printf("change topic=%s %s\n", change.GetTopic(), line)
		}
	}
}

// retryBackoff is exponential with full jitter above half the delay: 100 ms, 200 ms, ... up to max.
type retryBackoff struct {
	initial, max, current time.Duration
}

func newBackoff(initial, max time.Duration) *retryBackoff {
	return &retryBackoff{initial: initial, max: max, current: initial}
}

func (b *retryBackoff) next() time.Duration {
	delay := b.current/2 + time.Duration(rand.Int64N(int64(b.current/2)+1))
	b.current = min(b.current*2, b.max)
	return delay
}

func (b *retryBackoff) reset() { b.current = b.initial }
