#!/usr/bin/env bash
# Usage: tools/mavenjars.sh NAME JAR_GLOB
#
# Fetches the run-time dependencies of tools/NAME/pom.xml (a Kafka broker, Curator's recipes) from
# Maven Central into .cache/NAME/lib, for the integration tests that run them. JAR_GLOB names a jar
# the fetch must bring (kafka_2.13-*.jar): with it there and the pom unchanged since the last fetch,
# nothing is fetched. Idempotent; FORCE=1 fetches again. Needs mvn.
set -euo pipefail

if (($# != 2)); then
	echo "usage: $0 NAME JAR_GLOB" >&2
	exit 2
fi
name=$1 glob=$2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pom="$root/tools/$name/pom.xml"
lib="$root/.cache/$name/lib"
stamp="$lib/.pom.sha256"

want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -z "${FORCE:-}" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && compgen -G "$lib/$glob" >/dev/null; then
	echo "mavenjars.sh: $name jars already in $lib"
	exit 0
fi
# Fetch into a fresh directory and move it into place, so an interrupted run leaves no half-filled lib/.
tmp="$root/.cache/$name/lib.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mvn -B -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp"
if ! compgen -G "$tmp/$glob" >/dev/null; then
	echo "mavenjars.sh: no $glob among the jars of $pom" >&2
	exit 1
fi
echo "$want" >"$tmp/.pom.sha256"
rm -rf "$lib"
mv "$tmp" "$lib"
echo "mavenjars.sh: $name jars in $lib"
