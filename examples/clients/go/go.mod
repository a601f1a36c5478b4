module github.com/apache/rocketmq-namesrv-grpc/examples/clients/go

go 1.26.0

require (
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.77.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.46.1-0.20251013234738-63d1a5100f82 // indirect
	golang.org/x/sys v0.37.0 // indirect
	golang.org/x/text v0.30.0 // indirect
)
