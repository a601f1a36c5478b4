// Command namesrv-client is a Go client of the namesrv-grpc NameServer (gRPC, package namesrv.v1):
//
//	namesrv-client route    --addr HOST:PORT --topic T              look up a route, pick a writable queue
//	namesrv-client watch    --addr HOST:PORT --topic T [--topic U]  print every route change, across restarts
//	namesrv-client register --addr HOST:PORT --broker-addr H:P --topic T[:read[:write[:perm]]] [--compress]
//	                                                                register a broker and keep its session
//
// Every command takes --tls, --tls-ca-file, --tls-cert-file, --tls-key-file, --tls-server-name,
// --access-key and --secret-key (see the README's "Security" section); Go's flag package takes them
// with one dash or two, and messages name them with two, as the README does. Output is one line per
// event, key=value pairs, so scripts (and the repository's tests) can read it. Exit status: 0 done,
// 1 error (printed by describeError), 2 bad usage (an empty --topic of route or watch counts as a
// missing one: "route: --topic is required"), 3 the topic has no route (NOT_FOUND /
// TOPIC_ROUTE_NOT_FOUND).
package main

import (
	"fmt"
	"os"
)

const usage = `usage: namesrv-client COMMAND [flags]

commands:
  route     look up a topic's route (PickupTopicRoute) and pick a writable queue
  watch     watch topics' routes (WatchTopicRoutes), reconnecting after a NameServer restart
  register  register a broker (RegisterBroker) and keep its session (OpenBrokerSession)

"namesrv-client COMMAND --help" lists a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "route":
		code = runRoute(os.Args[2:])
	case "watch":
		code = runWatch(os.Args[2:])
	case "register":
		code = runRegister(os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "namesrv-client: unknown command %q\n%s", os.Args[1], usage)
		code = 2
	}
	os.Exit(code)
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
