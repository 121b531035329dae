// The test evaluation program: what an evaluation image does, reduced to what
// the tests need to see. It prints one JSON line per step on stdout and exits
// with a chosen code after a chosen time. Its environment (empty = unset):
//
//	TEST_EXIT_CODE      exit code, 0-255 (default 0)
//	TEST_DURATION       how long it runs in all, a Go duration (default 500ms)
//	TEST_ARTIFACT       a file to read (under the read-only artifact cache
//	                    mount): prints its sha256 and size, or the error
//	TEST_PROBE_URL      an https URL to GET twice: through the proxy that
//	                    HTTPS_PROXY / HTTP_PROXY / NO_PROXY name, then directly
//	                    (which NetworkPolicy blocks on a real node)
//	TEST_UPLOAD_URL     an https URL to PUT the run's result to (a small JSON
//	                    document), through the proxy only, as an evaluation
//	                    uploads to the platform's output host
//	TEST_PROBE_TIMEOUT  timeout of each GET and attempt, a Go duration (default 3s)
//	TEST_CA_FILE        PEM CA bundle to trust besides the system's
//	TEST_LISTEN         a TCP port to accept connections on while it runs
//	                    (a target for other pods' attempts)
//	TEST_ATTEMPTS       a JSON list of {"name","kind","addr"} to try once
//	                    each, kind "tcp" (a connect), "dns-udp" or "dns-tcp"
//	                    (one query; any DNS answer counts), addr "ip:port";
//	                    one line per attempt says whether it got through
//
// kwok plays TEST_EXIT_CODE and TEST_DURATION the same way for pods on its
// simulated nodes (test/cluster/kwok-stages.yaml).
package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

func emit(fields map[string]any) {
	line, _ := json.Marshal(fields)
	fmt.Println(string(line))
}

// fail reports a bad setting and exits 2: a test that sets it wrong learns
// why instead of seeing a plausible outcome.
func fail(name, value string, err error) {
	emit(map[string]any{"step": "config", "env": name, "value": value, "error": err.Error()})
	os.Exit(2)
}

func duration(name string, fallback time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		if err == nil {
			err = fmt.Errorf("negative duration")
		}
		fail(name, v, err)
	}
	return d
}

func readArtifact(path string) {
	f, err := os.Open(path)
	if err != nil {
		emit(map[string]any{"step": "artifact", "path": path, "error": err.Error()})
		return
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		emit(map[string]any{"step": "artifact", "path": path, "error": err.Error()})
		return
	}
	emit(map[string]any{"step": "artifact", "path": path, "sha256": hex.EncodeToString(h.Sum(nil)), "size": n})
}

// probe GETs target once; via is "proxy" (the environment's proxy settings)
// or "direct" (no proxy at all).
func probe(target string, via string, roots *x509.CertPool, timeout time.Duration) {
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}
	out := map[string]any{"step": "probe", "via": via, "url": target}
	if via == "proxy" {
		transport.Proxy = http.ProxyFromEnvironment
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		proxy, err := http.ProxyFromEnvironment(req)
		switch {
		case err != nil:
			out["proxy"] = "error: " + err.Error()
		case proxy == nil:
			out["proxy"] = "" // none applies: this attempt is direct too
		default:
			out["proxy"] = proxy.Redacted()
		}
	}
	client := &http.Client{Transport: transport, Timeout: timeout}
	start := time.Now()
	resp, err := client.Get(target)
	out["ms"] = time.Since(start).Milliseconds()
	if err != nil {
		out["error"] = err.Error()
		emit(out)
		return
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	out["status"] = resp.StatusCode
	out["bytes"] = n
	emit(out)
}

// upload PUTs a small result document to target through the environment's proxy.
func upload(target string, roots *x509.CertPool, timeout time.Duration) {
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}
	client := &http.Client{Transport: transport, Timeout: timeout}
	body, _ := json.Marshal(map[string]any{"result": "done", "host": os.Getenv("HOSTNAME")})
	out := map[string]any{"step": "upload", "url": target}
	req, err := http.NewRequest(http.MethodPut, target, bytes.NewReader(body))
	if err != nil {
		fail("TEST_UPLOAD_URL", target, err)
	}
	req.Header.Set("content-type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		out["error"] = err.Error()
		emit(out)
		return
	}
	defer resp.Body.Close()
	out["status"] = resp.StatusCode
	emit(out)
}

// httpsURL is the environment variable's value, which must be an https URL when set.
func httpsURL(name string) string {
	target := os.Getenv(name)
	if u, err := url.Parse(target); target != "" && (err != nil || u.Scheme != "https" || u.Host == "") {
		fail(name, target, fmt.Errorf("not an https URL"))
	}
	return target
}

type attempt struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Addr string `json:"addr"`
}

// dnsQuery is a query for probe.rlmesh.test. A with the given id.
func dnsQuery(id uint16) []byte {
	q := binary.BigEndian.AppendUint16(nil, id)
	q = append(q, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // recursion desired, one question
	for _, label := range []string{"probe", "rlmesh", "test"} {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	return append(q, 0, 0, 1, 0, 1) // root, type A, class IN
}

// try makes one attempt; nil means it got through (a connection, or a DNS answer to its query).
func try(a attempt, timeout time.Duration) error {
	network := "tcp"
	if a.Kind == "dns-udp" {
		network = "udp"
	}
	conn, err := net.DialTimeout(network, a.Addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if a.Kind == "tcp" {
		return nil
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	const id = 0x5eed
	query := dnsQuery(id)
	answer := make([]byte, 4096)
	var n int
	if a.Kind == "dns-udp" {
		if _, err = conn.Write(query); err == nil {
			n, err = conn.Read(answer)
		}
	} else {
		if _, err = conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(query))), query...)); err == nil {
			var size [2]byte
			if _, err = io.ReadFull(conn, size[:]); err == nil {
				n, err = io.ReadFull(conn, answer[:binary.BigEndian.Uint16(size[:])])
			}
		}
	}
	if err != nil {
		return err
	}
	if n < 12 || binary.BigEndian.Uint16(answer) != id || answer[2]&0x80 == 0 {
		return fmt.Errorf("not a DNS answer to the query (%d bytes)", n)
	}
	return nil
}

func attempts(spec string, timeout time.Duration) {
	var list []attempt
	if err := json.Unmarshal([]byte(spec), &list); err != nil {
		fail("TEST_ATTEMPTS", spec, err)
	}
	for _, a := range list {
		if a.Kind != "tcp" && a.Kind != "dns-udp" && a.Kind != "dns-tcp" {
			fail("TEST_ATTEMPTS", spec, fmt.Errorf("attempt %q: kind %q is not tcp, dns-udp or dns-tcp", a.Name, a.Kind))
		}
	}
	for _, a := range list {
		start := time.Now()
		err := try(a, timeout)
		out := map[string]any{"step": "attempt", "name": a.Name, "kind": a.Kind, "addr": a.Addr, "ok": err == nil, "ms": time.Since(start).Milliseconds()}
		if err != nil {
			out["error"] = err.Error()
		}
		emit(out)
	}
}

func listen(port string) {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fail("TEST_LISTEN", port, err)
	}
	emit(map[string]any{"step": "listen", "addr": l.Addr().String()})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func main() {
	start := time.Now()
	code := 0
	if v := os.Getenv("TEST_EXIT_CODE"); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil && (n < 0 || n > 255) {
			err = fmt.Errorf("exit codes are 0-255")
		}
		if err != nil {
			fail("TEST_EXIT_CODE", v, err)
		}
		code = n
	}
	runFor := duration("TEST_DURATION", 500*time.Millisecond)
	timeout := duration("TEST_PROBE_TIMEOUT", 3*time.Second)
	emit(map[string]any{"step": "start", "exitCode": code, "duration": runFor.String(), "uid": os.Getuid()})

	if port := os.Getenv("TEST_LISTEN"); port != "" {
		listen(port)
	}
	if spec := os.Getenv("TEST_ATTEMPTS"); spec != "" {
		attempts(spec, timeout)
	}
	if path := os.Getenv("TEST_ARTIFACT"); path != "" {
		readArtifact(path)
	}
	probeURL, uploadURL := httpsURL("TEST_PROBE_URL"), httpsURL("TEST_UPLOAD_URL")
	if probeURL != "" || uploadURL != "" {
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if file := os.Getenv("TEST_CA_FILE"); file != "" {
			pem, err := os.ReadFile(file)
			if err == nil && !roots.AppendCertsFromPEM(pem) {
				err = fmt.Errorf("no PEM certificate in it")
			}
			if err != nil {
				fail("TEST_CA_FILE", file, err)
			}
		}
		if probeURL != "" {
			probe(probeURL, "proxy", roots, timeout)
			probe(probeURL, "direct", roots, timeout)
		}
		if uploadURL != "" {
			upload(uploadURL, roots, timeout)
		}
	}

	time.Sleep(time.Until(start.Add(runFor)))
	emit(map[string]any{"step": "exit", "code": code, "ms": time.Since(start).Milliseconds()})
	os.Exit(code)
}
