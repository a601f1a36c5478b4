package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// connFlags are the flags every command takes: where the NameServer is, TLS, and RocketMQ 5 request
// signing (the README's "Security" section, the same flags as namesrv-admin).
type connFlags struct {
	addr          string
	timeoutMs     int64
	tls           bool
	tlsCAFile     string
	tlsCertFile   string
	tlsKeyFile    string
	tlsServerName string
	accessKey     string
	secretKey     string
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "NameServer gRPC address host:port")
	fs.Int64Var(&c.timeoutMs, "timeout-ms", 5000, "deadline of each unary call, milliseconds")
	fs.BoolVar(&c.tls, "tls", false, "use TLS, trusting the system's CA certificates")
	fs.StringVar(&c.tlsCAFile, "tls-ca-file", "", "CA certificates (PEM) to trust the server by; TLS on")
	fs.StringVar(&c.tlsCertFile, "tls-cert-file", "", "client certificate (PEM) for mutual TLS")
	fs.StringVar(&c.tlsKeyFile, "tls-key-file", "", "private key (PEM) of --tls-cert-file")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "name expected in the server's certificate")
	fs.StringVar(&c.accessKey, "access-key", os.Getenv("NAMESRV_ACCESS_KEY"), "sign calls with this access key (env NAMESRV_ACCESS_KEY)")
	fs.StringVar(&c.secretKey, "secret-key", os.Getenv("NAMESRV_SECRET_KEY"), "secret key of --access-key (env NAMESRV_SECRET_KEY)")
}

// timeout is the deadline of one unary call.
func (c *connFlags) timeout() time.Duration { return time.Duration(c.timeoutMs) * time.Millisecond }

// dial opens a channel with TLS and signing as configured. The channel reconnects by itself; its
// reconnect backoff is capped at 5 s so a restarted NameServer is found again quickly.
func (c *connFlags) dial() (*grpc.ClientConn, error) {
	if (c.tlsCertFile == "") != (c.tlsKeyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-key-file: give both or neither")
	}
	if (c.accessKey == "") != (c.secretKey == "") {
		return nil, errors.New("--access-key and --secret-key: give both or neither")
	}
	opts := []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	if c.tls || c.tlsCAFile != "" || c.tlsCertFile != "" {
		config := &tls.Config{ServerName: c.tlsServerName, MinVersion: tls.VersionTLS12}
		if c.tlsCAFile != "" {
			pem, err := os.ReadFile(c.tlsCAFile)
			if err != nil {
				return nil, fmt.Errorf("--tls-ca-file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--tls-ca-file %s: no PEM certificate in it", c.tlsCAFile)
			}
			config.RootCAs = pool
		}
		if c.tlsCertFile != "" {
			pair, err := tls.LoadX509KeyPair(c.tlsCertFile, c.tlsKeyFile)
			if err != nil {
				return nil, fmt.Errorf("--tls-cert-file/--tls-key-file: %w", err)
			}
			config.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(config)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if c.accessKey != "" {
		if strings.ContainsAny(c.accessKey, " \t,/") {
			return nil, errors.New("--access-key: must not contain white space, commas or slashes")
		}
		opts = append(opts, grpc.WithPerRPCCredentials(signer{c.accessKey, c.secretKey}))
	}
	return grpc.NewClient(c.addr, opts...)
}

// signer signs every call as RocketMQ 5 clients do: metadata x-mq-date-time (yyyyMMdd'T'HHmmss'Z',
// UTC) and authorization "MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
// Signature=<hex HMAC-SHA1(sk, x-mq-date-time)>". Streams are signed when they open.
type signer struct{ accessKey, secretKey string }

func (s signer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	dateTime := time.Now().UTC().Format("20060102T150405Z")
	mac := hmac.New(sha1.New, []byte(s.secretKey))
	mac.Write([]byte(dateTime))
	return map[string]string{
		"x-mq-date-time": dateTime,
		"authorization": fmt.Sprintf("MQv2-HMAC-SHA1 Credential=%s, SignedHeaders=x-mq-date-time, Signature=%s",
			s.accessKey, hex.EncodeToString(mac.Sum(nil))),
	}, nil
}

// RequireTransportSecurity is false: a NameServer with an ACL but without TLS must be reachable too
// (the signature covers only the date-time; use TLS where the network is not trusted).
func (signer) RequireTransportSecurity() bool { return false }

// errorReason is the ErrorInfo of a failed call: the NameServer puts one google.rpc.ErrorInfo
// (domain "namesrv.rocketmq") into the google.rpc.Status details of every error it returns.
func errorReason(err error) (*status.Status, *errdetails.ErrorInfo) {
	st := status.Convert(err)
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			return st, info
		}
	}
	return st, nil
}

// describeError is one line naming the status code, the reason and its metadata (sorted), then the
// server's message (what is wrong, for a person) as a JSON string: error code=INVALID_ARGUMENT
// reason=INVALID_FIELD domain=namesrv.rocketmq field=topic message="topic: ... is longer than 127
// characters". Programs decide by code and reason; the message is printed, never parsed.
func describeError(err error) string {
	st, info := errorReason(err)
	if info == nil {
		return fmt.Sprintf("error code=%s reason= message=%s", codeName(st.Code()), quoteMessage(st.Message()))
	}
	keys := make([]string, 0, len(info.GetMetadata()))
	for key := range info.GetMetadata() {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var meta strings.Builder
	for _, key := range keys {
		fmt.Fprintf(&meta, " %s=%s", key, info.GetMetadata()[key])
	}
	return fmt.Sprintf("error code=%s reason=%s domain=%s%s message=%s", codeName(st.Code()), info.GetReason(),
		info.GetDomain(), meta.String(), quoteMessage(st.Message()))
}

// quoteMessage is text as a JSON string (as JavaScript's JSON.stringify writes it, without
// escaping <, > and &), so the Go, Java and TypeScript examples print a message alike and on one line.
func quoteMessage(text string) string {
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(text); err != nil {
		return strconv.Quote(text)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// codeName is a status code's canonical name (NOT_FOUND, as in google.rpc.Code), from grpc-go's
// CamelCase one.
func codeName(code codes.Code) string {
	var name strings.Builder
	text := code.String()
	for i, r := range text {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(text[i-1])) {
			name.WriteByte('_')
		}
		name.WriteRune(unicode.ToUpper(r))
	}
	return name.String()
}
