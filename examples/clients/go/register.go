package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	namesrvv1 "github.com/apache/rocketmq-namesrv-grpc/examples/clients/go/gen/namesrv/v1"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// broker is what the register command registers, from its flags.
type broker struct {
	cluster, name, addr, haAddr, zone, instanceID string
	id                                            int32
	topics                                        map[string]*namesrvv1.TopicConfig
	compress                                      bool
	heartbeatTimeout                              time.Duration
	dataVersion                                   *namesrvv1.DataVersion
}

func runRegister(args []string) int {
	fs := flag.NewFlagSet("register", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	b := broker{topics: map[string]*namesrvv1.TopicConfig{}}
	fs.StringVar(&b.cluster, "cluster", "DefaultCluster", "cluster name (brokerClusterName)")
	fs.StringVar(&b.name, "broker-name", "broker-a", "broker name (brokerName)")
	id := fs.Int("broker-id", 0, "broker id: 0 master, > 0 slave")
	fs.StringVar(&b.addr, "broker-addr", "", "address clients send to, host:port (required)")
	fs.StringVar(&b.haAddr, "ha-addr", "", "HA (replication) address host:port, if any")
	fs.StringVar(&b.zone, "zone", "", "zone the broker runs in (RocketMQ 5.x ROCKETMQ_ZONE), if any")
	var topics stringList
	fs.Var(&topics, "topic", "topic NAME[:READ[:WRITE[:PERM]]] (repeat; default queues 4:4, perm 6)")
	fs.BoolVar(&b.compress, "compress", false, "zlib-compress the registration body (compressedRegister)")
	timeoutMs := fs.Int64("heartbeat-timeout-ms", 0, "silence after which the NameServer removes the broker, milliseconds (0: its default, 120000)")
	intervalMs := fs.Int64("heartbeat-interval-ms", 10000, "time between session heartbeats, milliseconds (kept under a third of the timeout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if b.addr == "" {
		fmt.Fprintln(os.Stderr, "register: --broker-addr is required")
		return 2
	}
	if *id < 0 || *id > 1<<31-1 {
		fmt.Fprintln(os.Stderr, "register: --broker-id must be 0..2147483647")
		return 2
	}
	if *intervalMs <= 0 || *timeoutMs < 0 {
		fmt.Fprintln(os.Stderr, "register: --heartbeat-interval-ms must be > 0 and --heartbeat-timeout-ms >= 0")
		return 2
	}
	b.id = int32(*id)
	b.heartbeatTimeout = time.Duration(*timeoutMs) * time.Millisecond
	interval := time.Duration(*intervalMs) * time.Millisecond
	for _, spec := range topics {
		config, err := parseTopic(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, "register: --topic", err)
			return 2
		}
		b.topics[config.GetTopicName()] = config
	}
	instance := make([]byte, 16)
	_, _ = rand.Read(instance)
	b.instanceID = hex.EncodeToString(instance)
	// Topic config version: the NameServer redoes the topic work only when it changes (S06).
	b.dataVersion = &namesrvv1.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1}

	cc, err := conn.dial()
	if err != nil {
		fmt.Fprintln(os.Stderr, "register:", err)
		return 2
	}
	defer cc.Close()
	client := namesrvv1.NewNameServerServiceClient(cc)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	backoff := newBackoff(100*time.Millisecond, 5*time.Second)
	for ctx.Err() == nil {
		err := keepSession(ctx, client, &b, conn.timeout(), interval, backoff)
		if ctx.Err() != nil {
			break
		}
		delay := backoff.next()
		fmt.Printf("session_lost %s retry_in_ms=%d\n", describeError(err), delay.Milliseconds())
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	// Leaving on purpose: unregister (the session's end would remove the broker too).
	unregisterCtx, cancel := context.WithTimeout(context.Background(), conn.timeout())
	defer cancel()
	_, err = client.UnregisterBroker(unregisterCtx, &namesrvv1.UnregisterBrokerRequest{
		ClusterName: b.cluster, BrokerName: b.name, BrokerId: b.id, BrokerAddr: b.addr, InstanceId: b.instanceID,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, describeError(err))
		return 1
	}
	fmt.Printf("unregistered broker=%s id=%d addr=%s\n", b.name, b.id, b.addr)
	return 0
}

// parseTopic reads NAME[:READ[:WRITE[:PERM]]].
func parseTopic(spec string) (*namesrvv1.TopicConfig, error) {
	parts := strings.Split(spec, ":")
	if parts[0] == "" || len(parts) > 4 {
		return nil, fmt.Errorf("%q: expected NAME[:READ[:WRITE[:PERM]]]", spec)
	}
	numbers := []int32{4, 4, 6}
	limits := []int{65535, 65535, 15}
	for i, text := range parts[1:] {
		n, err := strconv.Atoi(text)
		if err != nil || n < 0 || n > limits[i] {
			return nil, fmt.Errorf("%q: %q is not a number 0..%d", spec, text, limits[i])
		}
		numbers[i] = int32(n)
	}
	return &namesrvv1.TopicConfig{TopicName: parts[0], ReadQueueNums: numbers[0], WriteQueueNums: numbers[1], Perm: numbers[2]}, nil
}

// registerRequest serializes the RegisterBrokerBody, zlib-compresses it when asked, and sets
// body_crc32c to the CRC32C (Castagnoli) of the bytes exactly as sent.
func (b *broker) registerRequest() (*namesrvv1.RegisterBrokerRequest, error) {
	body, err := proto.Marshal(&namesrvv1.RegisterBrokerBody{TopicConfigTable: b.topics, DataVersion: b.dataVersion})
	if err != nil {
		return nil, err
	}
	if b.compress {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		body = buf.Bytes()
	}
	return &namesrvv1.RegisterBrokerRequest{
		ClusterName: b.cluster, BrokerName: b.name, BrokerId: b.id, BrokerAddr: b.addr, HaServerAddr: b.haAddr,
		Body: body, BodyCrc32C: crc32.Checksum(body, castagnoli), Compressed: b.compress,
		HeartbeatTimeoutMillis: b.heartbeatTimeout.Milliseconds(), InstanceId: b.instanceID, ZoneName: b.zone,
	}, nil
}

func (b *broker) registerOnce(ctx context.Context, client namesrvv1.NameServerServiceClient, timeout time.Duration) error {
	req, err := b.registerRequest()
	if err != nil {
		return err
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.RegisterBroker(callCtx, req, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	fmt.Printf("registered broker=%s id=%d addr=%s topics=%d compressed=%t body_bytes=%d crc32c=%08x master_addr=%s\n",
		b.name, b.id, b.addr, len(b.topics), b.compress, len(req.GetBody()), req.GetBodyCrc32C(), resp.GetMasterAddr())
	if other := resp.GetConflictingInstanceId(); other != "" {
		fmt.Printf("conflict other_instance=%s\n", other)
	}
	return nil
}

// keepSession registers, opens the session, says hello and sends heartbeats until the stream
// fails or ctx ends. The broker stays registered exactly as long as the session lives: when this
// process dies, the NameServer removes the broker at once (S15).
func keepSession(ctx context.Context, client namesrvv1.NameServerServiceClient, b *broker, timeout, interval time.Duration, backoff *retryBackoff) error {
	if err := b.registerOnce(ctx, client, timeout); err != nil {
		return err
	}
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.OpenBrokerSession(streamCtx, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	hello := &namesrvv1.OpenBrokerSessionRequest{Kind: &namesrvv1.OpenBrokerSessionRequest_Hello{Hello: &namesrvv1.SessionHello{
		ClusterName: b.cluster, BrokerName: b.name, BrokerId: b.id, BrokerAddr: b.addr, InstanceId: b.instanceID,
	}}}
	if err := stream.Send(hello); err != nil {
		return err
	}
	responses := make(chan *namesrvv1.OpenBrokerSessionResponse)
	failed := make(chan error, 1)
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				failed <- err
				return
			}
			responses <- resp
		}
	}()
	beat := &namesrvv1.OpenBrokerSessionRequest{Kind: &namesrvv1.OpenBrokerSessionRequest_Heartbeat{Heartbeat: &namesrvv1.SessionHeartbeat{}}}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = stream.CloseSend()
			return ctx.Err()
		case err := <-failed:
			if err == nil {
				err = errors.New("session ended")
			}
			return err
		case <-ticker.C:
			if err := stream.Send(beat); err != nil {
				return err
			}
		case resp := <-responses:
			switch kind := resp.GetKind().(type) {
			case *namesrvv1.OpenBrokerSessionResponse_Accepted:
				timeoutMs := kind.Accepted.GetHeartbeatTimeoutMillis()
				every := min(interval, time.Duration(timeoutMs)*time.Millisecond/3)
				ticker.Reset(every)
				backoff.reset()
				fmt.Printf("session accepted heartbeat_timeout_ms=%d heartbeat_every_ms=%d\n", timeoutMs, every.Milliseconds())
			case *namesrvv1.OpenBrokerSessionResponse_RegisterRequired:
				fmt.Printf("register_required reason=%q\n", kind.RegisterRequired.GetReason())
				if err := b.registerOnce(ctx, client, timeout); err != nil {
					return err
				}
				if err := stream.Send(hello); err != nil {
					return err
				}
			case *namesrvv1.OpenBrokerSessionResponse_MasterChanged:
				fmt.Printf("master_changed master_addr=%s ha_addr=%s\n", kind.MasterChanged.GetMasterAddr(), kind.MasterChanged.GetHaServerAddr())
			}
		}
	}
}
