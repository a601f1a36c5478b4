"""The gRPC front door: servicers that translate protobuf to :mod:`namesrv_grpc.core` calls, error
mapping to status codes, gRPC metrics, broker sessions."""
