#!/usr/bin/env bash
# Fetches the jars of an Apache Kafka 3.9 broker (tools/kafka/pom.xml) from Maven Central into
# .cache/kafka/lib, for integration/sasl_kafka_test.go. Idempotent; FORCE=1 fetches again.
# Needs mvn.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pom="$root/tools/kafka/pom.xml"
lib="$root/.cache/kafka/lib"
stamp="$lib/.pom.sha256"

want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -z "${FORCE:-}" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && compgen -G "$lib/kafka_2.13-*.jar" >/dev/null; then
	echo "fetch.sh: Kafka jars already in $lib"
	exit 0
fi
tmp="$root/.cache/kafka/lib.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
mvn -B -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp"
echo "$want" >"$tmp/.pom.sha256"
rm -rf "$lib"
mv "$tmp" "$lib"
echo "fetch.sh: Kafka jars in $lib"
