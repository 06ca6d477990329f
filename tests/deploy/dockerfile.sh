#!/usr/bin/env bash
# deploy/container/Dockerfile: no Docker engine runs here, so the image is
# not built; instead (1) it passes dockerfile-utils' checks (npm), (2) each
# RUN step is literally a command deploy/README.md gives for building by
# hand (both go through deploy/build.sh and deploy/deps.sh), (3) what it
# COPYs exists, and (4) the build context leaves build trees out.
source "$JRPC_E2E_LIB"
source "$(dirname "$0")/npm_tools.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DF=$ROOT/deploy/container/Dockerfile

deploy_npm_tools || { check "npm validators installed" 0 1; e2e_finish; }
lint() { # FILE: dockerfile-utils' diagnostics, one a line; exit 1 if any
    node -e '
const u = require(process.argv[1] + "/dockerfile-utils");
const d = u.validate(require("fs").readFileSync(process.argv[2], "utf8"), {});
for (const x of d) console.log("line " + (x.range.start.line + 1) + ": " + x.message);
process.exit(d.length ? 1 : 0);' "$NODE_TOOLS" "$1"
}
lint "$DF" > "$E2E_TMP/lint.out" 2>&1
check "dockerfile-utils finds nothing wrong" "0 " "$? $(cat "$E2E_TMP/lint.out")"
{ cat "$DF"; echo "COPY just-one-argument"; } > "$E2E_TMP/bad.Dockerfile"
lint "$E2E_TMP/bad.Dockerfile" > "$E2E_TMP/bad.out" 2>&1
check "a COPY with one argument is refused" "1 1" "$? $(grep -c 'at least two arguments' "$E2E_TMP/bad.out")"

# The RUN steps (continuation lines joined), and the README's shell lines.
sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' "$DF" | sed -n 's/^RUN //p' > "$E2E_TMP/run.txt"
check "the Dockerfile has RUN steps" 1 "$([ -s "$E2E_TMP/run.txt" ] && echo 1 || echo 0)"
check "its build stage runs deploy/build.sh" 1 "$(grep -c '^bash deploy/build.sh ' "$E2E_TMP/run.txt")"
while IFS= read -r step; do
    check "README has the step: $step" 1 \
        "$(grep -cxF -- "$step" <(sed 's/^[[:space:]]*//; s/[[:space:]]*#.*$//' "$ROOT/deploy/README.md") | sed 's/^[1-9][0-9]*$/1/')"
done < "$E2E_TMP/run.txt"

# COPY sources exist (other than --from=stage).
grep '^COPY ' "$DF" | grep -v -- '--from=' | awk '{ print $2 }' |
while IFS= read -r src; do
    [ -e "$ROOT/$src" ] || echo "missing: $src"
done > "$E2E_TMP/copy.out"
grep -q '^COPY --from=build ' "$DF"
check "COPY sources exist in the repository" "0 " "$? $(cat "$E2E_TMP/copy.out")"
check ".dockerignore leaves out build trees" 2 "$(grep -cxE 'build|build-\*' "$ROOT/.dockerignore")"
e2e_finish
