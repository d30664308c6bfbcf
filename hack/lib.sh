# Shared by hack/demo and hack/check-deploy (sourced, not run): a scratch directory,
# background processes that are always stopped, waits with clear errors, and the test
# API server. The caller sets `root` (the repository) before sourcing.
# shellcheck shell=bash
: "${root:?set root (the repository) before sourcing hack/lib.sh}"

# Colours are used by the callers too.
# shellcheck disable=SC2034
if [[ -t 1 ]]; then
	bold=$'\e[1m' dim=$'\e[2m' red=$'\e[31m' green=$'\e[32m' reset=$'\e[0m'
else
	bold='' dim='' red='' green='' reset=''
fi
step() { printf '%s==> %s%s\n' "$bold" "$*" "$reset"; }
info() { printf '%s    %s%s\n' "$dim" "$*" "$reset"; }
fail() {
	printf '%s%s: error: %s%s\n' "$red" "${prog:-hack}" "$*" "$reset" >&2
	exit 1
}

work="$(mktemp -d "${TMPDIR:-/tmp}/opm-${prog##*/}.XXXXXX")"
logs="$work/logs"
mkdir -p "$logs"
pids=()
names=()

# Stops what we started (newest first: the operator before the API server it talks to),
# keeps the logs when something went wrong, and removes the scratch directory.
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local i pid
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid="${pids[i]}"
		kill -TERM "$pid" 2>/dev/null || continue
		# The API server takes a few seconds to stop etcd cleanly.
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "${prog:-hack}: ${names[i]} (pid $pid) did not stop; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	# Ctrl-C (130) and SIGTERM (143) are how a user stops us, not failures.
	if ((rc != 0 && rc != 130 && rc != 143)) && [[ -d "$logs" ]]; then
		local kept f
		kept="$(mktemp -d "${TMPDIR:-/tmp}/opm-${prog##*/}-logs.XXXXXX")"
		cp -r "$logs/." "$kept/"
		for f in "$kept"/*.log; do
			[[ -s "$f" ]] || continue
			printf '%s--- last lines of %s ---%s\n' "$dim" "$(basename "$f")" "$reset" >&2
			tail -n 15 "$f" >&2
		done
		printf '%s%s failed (exit %d); logs kept in %s%s\n' "$red" "${prog:-hack}" "$rc" "$kept" "$reset" >&2
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'printf "\n%s: stopping\n" "${prog:-hack}" >&2; exit 130' INT
trap 'exit 143' TERM

# start <name> <command...>: runs it in the background, output in $logs/<name>.log.
start() {
	local name="$1"
	shift
	"$@" >"$logs/$name.log" 2>&1 &
	pids+=("$!")
	names+=("$name")
}

# alive <name> <pid>: fails when the process has gone away.
alive() {
	kill -0 "$2" 2>/dev/null || fail "$1 exited early (log: $logs/$1.log)"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_for <name> <seconds> <pid> <command...>: polls the command until it succeeds, as long
# as the process <pid> lives.
wait_for() {
	local what="$1" secs="$2" pid="$3"
	shift 3
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		alive "$what" "$pid"
		((SECONDS < deadline)) || fail "$what not ready after ${secs}s (log: $logs/$what.log)"
		sleep 0.25
	done
}

# ensure_tools: installs the pinned tools when missing and exports OPM_* paths.
# `ensure_tools helm` also wants helm (only hack/check-deploy does).
ensure_tools() {
	local only=(--skip-helm)
	[[ "${1:-}" == helm ]] && only=()
	if ! "$root/tools/install" --check "${only[@]}" >/dev/null 2>&1; then
		info "missing; building them with tools/install (once; a cold build takes several minutes)"
		"$root/tools/install" "${only[@]}" >&2 || fail "tools/install failed"
	fi
	eval "$("$root/tools/install" --env 2>/dev/null)"
	local v
	for v in OPM_CUE_BIN OPM_APISERVER_BIN OPM_KUBECTL_BIN OPM_KCM_BIN OPM_SCHEDULER_BIN OPM_KWOK_BIN; do
		[[ -x "${!v}" ]] || fail "$v=${!v} is not executable; run tools/install"
	done
	[[ -d "$OPM_FLUX_CRDS_DIR" ]] || fail "OPM_FLUX_CRDS_DIR=$OPM_FLUX_CRDS_DIR is missing; run tools/install"
	command -v python3 >/dev/null || fail "python3 is needed (free ports, the artifact HTTP server)"
	command -v curl >/dev/null || fail "curl is needed (probes)"
}

# The admin kubectl of the scratch cluster.
kubectl() { "$OPM_KUBECTL_BIN" --kubeconfig "$work/kubeconfig" "$@"; }

# start_apiserver: etcd + kube-apiserver; the admin kubeconfig is $work/kubeconfig.
start_apiserver() {
	start apiserver "$OPM_APISERVER_BIN" --kubeconfig-out "$work/kubeconfig" --data-dir "$work/apiserver"
	wait_for apiserver 120 "${pids[-1]}" test -s "$work/kubeconfig"
	info "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}') (kubeconfig $work/kubeconfig)"
}

# start_workloads: the real kube-controller-manager and kube-scheduler, and kwok with three
# fake nodes (the same set-up as opm_testenv::workloads), so the example Deployments get
# ReplicaSets and Pods that are scheduled, become Running and Ready, and the releases'
# Ready means healthy (SPEC §26) as it will on a real cluster.
start_workloads() {
	local kc="$work/kubeconfig" auth i
	auth=(--kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc"
		--leader-elect=false --secure-port=0)
	# The token controller needs a signing key and nothing here reads pod tokens.
	start kube-controller-manager "$OPM_KCM_BIN" "${auth[@]}" \
		--controllers='*,-serviceaccount-token' --use-service-account-credentials=false \
		--node-monitor-grace-period=1h
	start kube-scheduler "$OPM_SCHEDULER_BIN" "${auth[@]}"
	start kwok "$OPM_KWOK_BIN" --kubeconfig="$kc" --config="$OPM_KWOK_STAGES" \
		--manage-all-nodes=false \
		--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--cidr=10.244.0.0/16 --node-ip=10.250.0.1
	for i in 0 1 2; do
		kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "kwok-node-$i",
   "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
   "labels": {"kubernetes.io/hostname": "kwok-node-$i", "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", "type": "kwok"}},
 "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}}
EOF
	done
	wait_for kwok 120 "${pids[-1]}" kubectl wait --for=condition=Ready node --all --timeout=2s
	info "kube-controller-manager, kube-scheduler, kwok with 3 fake nodes (logs in $logs)"
}

# sa_kubeconfig <namespace> <name> <file>: a kubeconfig holding a token of that
# ServiceAccount (TokenRequest API), for running something with exactly its rights.
sa_kubeconfig() {
	local ns="$1" sa="$2" out="$3" token server
	token="$(kubectl -n "$ns" create token "$sa" --duration=2h)" ||
		fail "cannot create a token for $ns/$sa"
	kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
		base64 -d >"$work/ca.crt"
	server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
	{
		"$OPM_KUBECTL_BIN" --kubeconfig "$out" config set-cluster scratch --server="$server" \
			--certificate-authority="$work/ca.crt" --embed-certs
		"$OPM_KUBECTL_BIN" --kubeconfig "$out" config set-credentials "$sa" --token="$token"
		"$OPM_KUBECTL_BIN" --kubeconfig "$out" config set-context scratch --cluster=scratch \
			--user="$sa" --namespace="$ns"
		"$OPM_KUBECTL_BIN" --kubeconfig "$out" config use-context scratch
	} >/dev/null
}

# The example world hack/demo and hack/image-check share (each needs start_apiserver first).

# install_deploy: deploy/ (kubectl apply -k) and the Flux source CRDs, all Established.
install_deploy() {
	step "installing deploy/ (kubectl apply -k) and the Flux source CRDs"
	kubectl apply --server-side -k "$root/deploy" >"$logs/install.log" 2>&1 ||
		fail "kubectl apply -k deploy/ failed: $(tail -n 5 "$logs/install.log")"
	info "$(grep -c . "$logs/install.log") objects from deploy/"
	local flux_crds=() kind
	for kind in ocirepositories gitrepositories buckets; do
		flux_crds+=(-f "$OPM_FLUX_CRDS_DIR/source.toolkit.fluxcd.io_$kind.yaml")
	done
	kubectl apply --server-side "${flux_crds[@]}" >>"$logs/install.log" 2>&1 ||
		fail "installing the Flux source CRDs failed: $(tail -n 5 "$logs/install.log")"
	kubectl wait --for condition=Established --timeout=60s \
		crd/modulereleases.releases.opmodel.dev crd/releases.releases.opmodel.dev \
		crd/platforms.releases.opmodel.dev crd/ocirepositories.source.toolkit.fluxcd.io crd/gitrepositories.source.toolkit.fluxcd.io \
		crd/buckets.source.toolkit.fluxcd.io >>"$logs/install.log" 2>&1 ||
		fail "CRDs not Established: $(tail -n 5 "$logs/install.log")"
}

# publish_example_module: a `cue mod registry` on a free port ($registry) holding
# examples/modules/web as example.com/modules/web@v0 v0.2.1.
publish_example_module() {
	local registry_port
	registry_port="$(free_port)"
	registry="127.0.0.1:$registry_port"
	step "cue mod registry on $registry; publishing example.com/modules/web@v0 v0.2.1"
	start registry "$OPM_CUE_BIN" mod registry "$registry"
	wait_for registry 30 "${pids[-1]}" curl -sf "http://$registry/v2/"
	cp -r "$root/examples/modules/web" "$work/module"
	# The module shows the version it was published as (examples/README.md).
	printf 'package web\n\n_version: "v0.2.1"\n' >"$work/module/version.cue"
	(cd "$work/module" && CUE_REGISTRY="$registry+insecure" CUE_CACHE_DIR="$work/cue-publish-cache" \
		"$OPM_CUE_BIN" mod publish v0.2.1) >"$logs/publish.log" 2>&1 ||
		fail "cue mod publish failed: $(cat "$logs/publish.log")"
}

# publish_opm_fixtures: the OPM fixtures of examples/opm/ (our own opmodel.dev/core@v2, the
# catalog opmodel.dev/catalogs/opm@v2 in both builds, the modules example.com/opm/*) into
# the registry publish_example_module started, with examples/opm/publish.sh (dependency
# order, the versions the tests use).
publish_opm_fixtures() {
	: "${registry:?publish_example_module starts the registry first}"
	step "publishing the OPM fixtures (examples/opm: core v2, catalog, modules) to $registry"
	CUE_REGISTRY="$registry+insecure" CUE_CACHE_DIR="$work/cue-publish-cache" \
		"$root/examples/opm/publish.sh" >"$logs/publish-opm.log" 2>&1 ||
		fail "examples/opm/publish.sh failed: $(tail -n 5 "$logs/publish-opm.log")"
	info "opmodel.dev/core@v2, opmodel.dev/catalogs/opm@v2 (v2.0.0-test.1, test.2), example.com/opm/web@v1 v1.0.0, …"
}

# serve_example_release: examples/releases/web as a reproducible tar.gz over HTTP on a free
# port, published in OCIRepository default/web-release's status.artifact (standing in for
# Flux).
serve_example_release() {
	local artifact_port digest size now status artifact_url
	artifact_port="$(free_port)"
	step "serving examples/releases/web as a tar.gz on http://127.0.0.1:$artifact_port"
	mkdir -p "$work/artifacts"
	# Reproducible bytes: sorted names, no owners, no times (so the digest is stable).
	tar -C "$root/examples/releases/web" --sort=name --owner=0 --group=0 --numeric-owner \
		--mtime=@0 -cf - . | gzip -n >"$work/artifacts/web-release.tar.gz"
	digest="sha256:$(sha256sum "$work/artifacts/web-release.tar.gz" | cut -d' ' -f1)"
	size="$(stat -c %s "$work/artifacts/web-release.tar.gz")"
	start artifacts python3 -m http.server "$artifact_port" --bind 127.0.0.1 --directory "$work/artifacts"
	artifact_url="http://127.0.0.1:$artifact_port/web-release.tar.gz"
	wait_for artifacts 30 "${pids[-1]}" curl -sf -o /dev/null "$artifact_url"
	info "$artifact_url $digest"

	step "OCIRepository default/web-release with status.artifact (as Flux would publish it)"
	kubectl apply -f "$root/examples/manifests/ocirepository.yaml" >>"$logs/install.log" 2>&1 ||
		fail "creating the OCIRepository failed: $(tail -n 5 "$logs/install.log")"
	now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	status="$(
		cat <<-EOF
	{"status": {
	  "observedGeneration": 1,
	  "url": "$artifact_url",
	  "artifact": {"url": "$artifact_url", "path": "ocirepository/default/web-release/web-release.tar.gz",
	               "revision": "latest@$digest", "digest": "$digest", "size": $size,
	               "lastUpdateTime": "$now"},
	  "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
	                  "message": "stored artifact for digest 'latest@$digest'", "lastTransitionTime": "$now"}]
	}}
	EOF
	)"
	kubectl -n default patch ocirepository web-release --subresource=status --type=merge -p "$status" \
		>>"$logs/install.log" 2>&1 || fail "setting the OCIRepository status failed: $(tail -n 5 "$logs/install.log")"
}
