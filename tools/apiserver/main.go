// Command opm-test-apiserver runs an embedded etcd and a real kube-apiserver in one
// process, for integration tests: the same shape as controller-runtime's envtest, but
// built from the published Go modules so no binary has to be downloaded.
//
// It writes a kubeconfig (admin token, the generated CA) to --kubeconfig-out only once
// /readyz answers, so a caller can simply wait for that file. It exits cleanly on
// SIGTERM/SIGINT, when its stdin reaches EOF (with --watch-stdin) or when its parent
// process goes away, and then removes its data directory unless --keep-data is given.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

type options struct {
	dataDir        string
	keepData       bool
	removeDataDir  bool
	kubeconfigOut  string
	readyFile      string
	watchStdin     bool
	serviceCIDR    string
	readyTimeout   time.Duration
	extraArgs      stringList
	apiserverLogV  int
	securePort     int
	shutdownWindow time.Duration
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var o options
	flag.StringVar(&o.dataDir, "data-dir", "", "directory for etcd data, certificates and keys (default: a new temporary directory)")
	flag.BoolVar(&o.keepData, "keep-data", false, "do not remove the data directory on exit")
	flag.BoolVar(&o.removeDataDir, "remove-data-dir", false, "remove the whole --data-dir on exit (default: only what this program created in it)")
	flag.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "path to write the admin kubeconfig to once the server is ready (required)")
	flag.StringVar(&o.readyFile, "ready-file", "", "optional path to write the server URL to once ready")
	flag.BoolVar(&o.watchStdin, "watch-stdin", false, "shut down when stdin reaches EOF (the parent closed it or died)")
	flag.StringVar(&o.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/16", "service CIDR")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "give up when /readyz is not ok within this time")
	flag.Var(&o.extraArgs, "apiserver-arg", "extra kube-apiserver flag (repeatable), e.g. --apiserver-arg=--v=2")
	flag.IntVar(&o.apiserverLogV, "v", 0, "kube-apiserver log verbosity")
	flag.IntVar(&o.securePort, "secure-port", 0, "API server port on 127.0.0.1 (0: pick a free one)")
	flag.DurationVar(&o.shutdownWindow, "shutdown-timeout", 20*time.Second, "force exit when a clean shutdown takes longer")
	flag.Parse()
	if o.kubeconfigOut == "" {
		fmt.Fprintln(os.Stderr, "opm-test-apiserver: --kubeconfig-out is required")
		os.Exit(2)
	}
	os.Exit(run(o))
}

func run(o options) int {
	createdDir := false
	if o.dataDir == "" {
		d, err := os.MkdirTemp("", "opm-test-apiserver-")
		if err != nil {
			return fail("create data dir: %v", err)
		}
		o.dataDir, createdDir = d, true
	} else if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return fail("create data dir: %v", err)
	}
	cleanup := func() {
		if !o.keepData {
			if createdDir || o.removeDataDir {
				_ = os.RemoveAll(o.dataDir)
			} else {
				for _, sub := range []string{"etcd", "pki"} {
					_ = os.RemoveAll(filepath.Join(o.dataDir, sub))
				}
			}
		}
	}

	etcd, etcdURL, err := startEtcd(filepath.Join(o.dataDir, "etcd"))
	if err != nil {
		cleanup()
		return fail("start etcd: %v", err)
	}
	stopEtcd := sync.OnceFunc(func() {
		etcd.Close()
		cleanup()
	})

	// The API server exits through klog.Fatal when, e.g., it is stopped while its
	// post-start hooks still run; clean up on that path too.
	klog.OsExit = func(code int) {
		done := make(chan struct{})
		go func() {
			stopEtcd()
			_ = os.Remove(o.kubeconfigOut)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		os.Exit(code)
	}

	pki, err := writePKI(filepath.Join(o.dataDir, "pki"))
	if err != nil {
		stopEtcd()
		return fail("generate keys: %v", err)
	}
	port := o.securePort
	if port == 0 {
		if port, err = freePort(); err != nil {
			stopEtcd()
			return fail("pick a port: %v", err)
		}
	}
	serverURL := "https://127.0.0.1:" + strconv.Itoa(port)

	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + pki.dir,
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--token-auth-file=" + pki.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPublic,
		"--service-account-signing-key-file=" + pki.saPrivate,
		"--service-cluster-ip-range=" + o.serviceCIDR,
		"--allow-privileged=true",
		// No controller-manager runs, so no "default" ServiceAccount is ever created:
		// the admission plugin would reject every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--v=" + strconv.Itoa(o.apiserverLogV),
	}
	args = append(args, o.extraArgs...)

	// The API server command installs its own SIGTERM/SIGINT handler (which cancels its
	// context); we listen as well, to bound the time a shutdown may take.
	// That handler exits at once, without cleanup, on a *second* signal, so we send
	// ourselves at most one, and none when a signal has already arrived.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var signalled atomic.Bool
	shutdown := sync.OnceFunc(func() {
		go func() {
			time.Sleep(o.shutdownWindow)
			fmt.Fprintln(os.Stderr, "opm-test-apiserver: shutdown timed out, forcing exit")
			stopEtcd()
			os.Exit(1)
		}()
	})
	go func() {
		<-sigs
		signalled.Store(true)
		shutdown()
	}()
	var selfOnce sync.Once
	selfTerminate := func(why string) {
		selfOnce.Do(func() {
			// A dying parent may also signal us (PR_SET_PDEATHSIG): give it a moment.
			time.Sleep(200 * time.Millisecond)
			if signalled.Load() {
				return
			}
			fmt.Fprintf(os.Stderr, "opm-test-apiserver: %s, shutting down\n", why)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		})
	}
	if o.watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			selfTerminate("stdin closed")
		}()
	}
	go watchParent(selfTerminate)

	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(args)

	go func() {
		if err := waitReady(serverURL, pki, o.readyTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "opm-test-apiserver: %v\n", err)
			selfTerminate("not ready")
			return
		}
		if err := writeKubeconfig(o.kubeconfigOut, serverURL, pki); err != nil {
			fmt.Fprintf(os.Stderr, "opm-test-apiserver: write kubeconfig: %v\n", err)
			selfTerminate("cannot write kubeconfig")
			return
		}
		if o.readyFile != "" {
			_ = writeAtomic(o.readyFile, []byte(serverURL+"\n"), 0o644)
		}
		fmt.Printf("opm-test-apiserver ready: server=%s kubeconfig=%s\n", serverURL, o.kubeconfigOut)
	}()

	code := cli.Run(cmd)
	stopEtcd()
	_ = os.Remove(o.kubeconfigOut)
	if o.readyFile != "" {
		_ = os.Remove(o.readyFile)
	}
	return code
}

// watchParent notices when the process that started us is gone (we get re-parented),
// so a killed test binary never leaves an API server behind.
func watchParent(terminate func(string)) {
	parent := os.Getppid()
	for {
		time.Sleep(500 * time.Millisecond)
		if os.Getppid() != parent {
			terminate("parent process exited")
			return
		}
	}
}

func startEtcd(dir string) (*embed.Etcd, string, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(clientPort))
	pu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(peerPort))
	cfg := embed.NewConfig()
	cfg.Name = "opm-test"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	// Test data is thrown away: durability only costs time.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd not ready after 60s")
	}
	return e, cu.String(), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type pkiFiles struct {
	dir         string
	caCert      string
	caPEM       []byte
	servingCert string
	servingKey  string
	saPublic    string
	saPrivate   string
	tokenFile   string
	adminToken  string
}

// writePKI generates a throw-away CA, a serving certificate for 127.0.0.1/localhost,
// the service-account signing key pair and the admin token.
func writePKI(dir string) (*pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pkiFiles{
		dir:         dir,
		caCert:      filepath.Join(dir, "ca.crt"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saPublic:    filepath.Join(dir, "sa.pub"),
		saPrivate:   filepath.Join(dir, "sa.key"),
		tokenFile:   filepath.Join(dir, "tokens.csv"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "opm-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(p.caCert, p.caPEM, 0o644); err != nil {
		return nil, err
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.servingCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), 0o644); err != nil {
		return nil, err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.servingKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}), 0o600); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPrivate, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPublic, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}), 0o644); err != nil {
		return nil, err
	}

	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	p.adminToken = hex.EncodeToString(tok)
	line := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", p.adminToken)
	if err := os.WriteFile(p.tokenFile, []byte(line), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

func waitReady(serverURL string, p *pkiFiles, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, serverURL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+p.adminToken)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("/readyz not ok after %s: %s", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeKubeconfig(path, serverURL string, p *pkiFiles) error {
	ca := base64.StdEncoding.EncodeToString(p.caPEM)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: opm-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: opm-test
  context:
    cluster: opm-test
    user: admin
    namespace: default
current-context: opm-test
`, serverURL, ca, p.adminToken)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeAtomic(path, []byte(cfg), 0o600)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "opm-test-apiserver: "+format+"\n", args...)
	return 1
}
