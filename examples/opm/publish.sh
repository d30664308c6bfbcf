#!/usr/bin/env bash
# Publishes every OPM fixture of examples/opm/ to the CUE registry in $CUE_REGISTRY, at
# the versions the tests use (testenv/src/opm.rs publishes the same list):
#   opmodel.dev/core@v2             v2.0.0-test.1, v2.0.0-test.2
#   opmodel.dev/catalogs/opm@v2     v2.0.0-test.1, v2.0.0-test.2
#   example.com/opm/web@v1          v1.0.0, v1.0.1
#   example.com/opm/{worker,cache}@v1                  v1.0.0
#   example.com/opm/verdicts/{unmatched,unhandled,incomplete}@v1  v1.0.0
#   opmodel.dev/catalogs/extra@v2   v2.0.0-test.1
#   opmodel.dev/core@v0             v0.4.0-test.1
#   example.com/opm/verdicts/legacy@v0                 v0.1.0
# A fixture with identity/version.cue is published from a copy whose version.cue names
# the version being published (without the "v").
#
# Usage: CUE_REGISTRY=127.0.0.1:5000+insecure examples/opm/publish.sh
#        (the cue binary: $OPM_CUE_BIN, else `cue` on PATH)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cue="${OPM_CUE_BIN:-cue}"
: "${CUE_REGISTRY:?set CUE_REGISTRY to the registry to publish to}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

publish() { # publish DIR VERSION
	local dir="$1" version="$2" copy
	copy="$work/$(basename "$dir")-$version"
	cp -a "$dir/." "$copy"
	if [[ -f "$copy/identity/version.cue" ]]; then
		printf 'package identity\n\nVersion: "%s"\n' "${version#v}" >"$copy/identity/version.cue"
	fi
	(cd "$copy" && "$cue" mod publish "$version")
}

# Dependency order: cue mod publish resolves a module's dependencies.
publish "$here/core" v2.0.0-test.1
publish "$here/core" v2.0.0-test.2
publish "$here/verdicts/core_v0" v0.4.0-test.1
publish "$here/catalog" v2.0.0-test.1
publish "$here/catalog" v2.0.0-test.2
publish "$here/verdicts/catalog_extra" v2.0.0-test.1
publish "$here/modules/web" v1.0.0
publish "$here/modules/web" v1.0.1
publish "$here/modules/worker" v1.0.0
publish "$here/modules/cache" v1.0.0
for name in unmatched unhandled incomplete; do
	publish "$here/verdicts/$name" v1.0.0
done
publish "$here/verdicts/legacy" v0.1.0
