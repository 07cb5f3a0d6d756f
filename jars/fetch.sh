#!/usr/bin/env bash
# Fetch the Java jars nsaudit runs beside: each jars/<name>/pom.xml lists one classpath, and
# `mvn dependency:copy-dependencies` copies it (from ~/.m2, downloading what is missing) into
# jars/<name>/lib/. A stamp of the pom's hash makes a second run a no-op that never starts Maven.
#
#   bash jars/fetch.sh            fetch every classpath that changed
#   bash jars/fetch.sh NAME...    only those
set -euo pipefail
cd "$(dirname "$0")"

if [ "$#" -eq 0 ]; then
    set -- $(for pom in */pom.xml; do dirname "$pom"; done)
fi
for name in "$@"; do
    pom="$name/pom.xml"
    if [ ! -f "$pom" ]; then
        echo "jars: no $pom (known: $(ls -d */ | tr -d / | tr '\n' ' '))" >&2
        exit 2
    fi
    stamp="$name/lib/.fetched"
    want=$(sha256sum "$pom" | cut -c1-16)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        continue
    fi
    if ! command -v mvn >/dev/null 2>&1; then
        echo "jars: mvn not found; install Maven to fetch $name (apt-get install maven)" >&2
        exit 1
    fi
    echo "jars: fetching $name into jars/$name/lib (Maven, cached in ~/.m2)" >&2
    rm -rf "$name/lib"
    if ! (cd "$name" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib \
            -DincludeScope=runtime >"../.mvn-$name.log" 2>&1); then
        echo "jars: Maven failed for $name; its output:" >&2
        tail -20 ".mvn-$name.log" >&2
        exit 1
    fi
    rm -f ".mvn-$name.log"
    echo "$want" > "$stamp"
done
