// The tools that build the upstream-shaped series (upstream/): a stand-in for protoc 23.4 and
// the protoc plugins at the versions Kubernetes v1.37.1's hack/tools pins, and logcheck (the
// newest sigs.k8s.io/logtools release) for hack/upstream.sh verify. A module of its own so that
// those versions are exactly upstream's, whatever the root module needs.
module github.com/dra-failfast/dra-failfast/hack/tools

go 1.26.0

require (
	github.com/bufbuild/protocompile v0.14.1
	golang.org/x/tools v0.26.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/exp v0.0.0-20240506185415-9bf2ced13842 // indirect
	golang.org/x/mod v0.21.0 // indirect
	golang.org/x/sync v0.8.0 // indirect
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2 // indirect
	sigs.k8s.io/logtools v0.11.0 // indirect
)

tool (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc
	google.golang.org/protobuf/cmd/protoc-gen-go
	sigs.k8s.io/logtools/logcheck
)
