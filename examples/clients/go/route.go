package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"

	namesrvv1 "github.com/apache/rocketmq-namesrv-grpc/examples/clients/go/gen/namesrv/v1"
)

// permWrite is RocketMQ's PermName.PERM_WRITE bit.
const permWrite = 2

// routeReasonNotFound is the ErrorInfo reason of a topic without a route.
const routeReasonNotFound = "TOPIC_ROUTE_NOT_FOUND"

func runRoute(args []string) int {
	fs := flag.NewFlagSet("route", flag.ContinueOnError)
	var conn connFlags
	conn.register(fs)
	topic := fs.String("topic", "", "topic to look up (required)")
	zone := fs.String("zone", "", "zone mode: only the brokers of this zone (and those without a master)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *topic == "" { // missing or empty: refused here, as in the Java and TypeScript examples
		fmt.Fprintln(os.Stderr, "route: --topic is required")
		return 2
	}
	cc, err := conn.dial()
	if err != nil {
		fmt.Fprintln(os.Stderr, "route:", err)
		return 2
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), conn.timeout())
	defer cancel()
	resp, err := namesrvv1.NewNameServerServiceClient(cc).PickupTopicRoute(ctx, &namesrvv1.PickupTopicRouteRequest{Topic: *topic, ZoneName: *zone})
	if err != nil {
		st, info := errorReason(err)
		// Decide by the reason, never by the message text.
		if st.Code() == codes.NotFound && info.GetReason() == routeReasonNotFound {
			fmt.Printf("not_found topic=%s reason=%s\n", *topic, info.GetReason())
			return 3
		}
		fmt.Fprintln(os.Stderr, describeError(err))
		return 1
	}
	route := resp.GetRoute()
	fmt.Printf("route topic=%s %s\n", *topic, routeSummary(route))
	queues := writableQueues(route)
	if len(queues) == 0 {
		fmt.Printf("picked topic=%s none writable=0\n", *topic)
		return 0
	}
	// A producer picks queues round robin from a random start (RocketMQ TopicPublishInfo.sendWhichQueue).
	q := queues[rand.IntN(len(queues))]
	fmt.Printf("picked topic=%s broker=%s queue=%d addr=%s writable=%d\n", *topic, q.brokerName, q.queueID, q.addr, len(queues))
	return 0
}

// messageQueue is one queue a producer may send to.
type messageQueue struct {
	brokerName string
	queueID    int32
	addr       string
}

// writableQueues follows RocketMQ's MQClientInstance.topicRouteData2TopicPublishInfo: with an order
// config ("broker-a:4;broker-b:4") its entries give the queues; otherwise every QueueData with the
// WRITE permission whose broker name has a live master (broker id 0) gives write_queue_nums queues,
// broker names in order.
func writableQueues(route *namesrvv1.TopicRouteData) []messageQueue {
	masters := map[string]string{}
	for _, bd := range route.GetBrokerDatas() {
		if addr, ok := bd.GetBrokerAddrs()[0]; ok {
			masters[bd.GetBrokerName()] = addr
		}
	}
	var queues []messageQueue
	if conf := route.GetOrderTopicConf(); conf != "" {
		for _, item := range strings.Split(conf, ";") {
			name, nums, ok := strings.Cut(item, ":")
			n, err := strconv.Atoi(nums)
			if !ok || err != nil {
				continue
			}
			for id := 0; id < n; id++ {
				queues = append(queues, messageQueue{name, int32(id), masters[name]})
			}
		}
		return queues
	}
	qds := append([]*namesrvv1.QueueData(nil), route.GetQueueDatas()...)
	sort.Slice(qds, func(i, j int) bool { return qds[i].GetBrokerName() < qds[j].GetBrokerName() })
	for _, qd := range qds {
		addr, ok := masters[qd.GetBrokerName()]
		if qd.GetPerm()&permWrite == 0 || !ok {
			continue
		}
		for id := int32(0); id < qd.GetWriteQueueNums(); id++ {
			queues = append(queues, messageQueue{qd.GetBrokerName(), id, addr})
		}
	}
	return queues
}

// routeSummary is a route as one canonical text: queues=<broker:rR:wW:pP:fF,...>
// brokers=<broker@cluster/id=addr/...,...> [order=<conf>], everything sorted.
func routeSummary(route *namesrvv1.TopicRouteData) string {
	var queues []string
	for _, qd := range route.GetQueueDatas() {
		queues = append(queues, fmt.Sprintf("%s:r%d:w%d:p%d:f%d", qd.GetBrokerName(), qd.GetReadQueueNums(),
			qd.GetWriteQueueNums(), qd.GetPerm(), qd.GetTopicSysFlag()))
	}
	sort.Strings(queues)
	var brokers []string
	for _, bd := range route.GetBrokerDatas() {
		ids := make([]int32, 0, len(bd.GetBrokerAddrs()))
		for id := range bd.GetBrokerAddrs() {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		var b strings.Builder
		fmt.Fprintf(&b, "%s@%s", bd.GetBrokerName(), bd.GetCluster())
		for _, id := range ids {
			fmt.Fprintf(&b, "/%d=%s", id, bd.GetBrokerAddrs()[id])
		}
		brokers = append(brokers, b.String())
	}
	sort.Strings(brokers)
	text := fmt.Sprintf("queues=%s brokers=%s", strings.Join(queues, ","), strings.Join(brokers, ","))
	if conf := route.GetOrderTopicConf(); conf != "" {
		text += " order=" + conf
	}
	return text
}
