#!/usr/bin/env bash
# Fetches the jars of a real Apache ZooKeeper server (the version in tools/zookeeper/pom.xml) from
# Maven Central into .cache/zookeeper/lib, and writes .cache/zookeeper/conf/logback.xml (WARN and
# above to stderr). internal/testkit/zkserver starts that server for tests; to run it by hand:
#
#   java -cp ".cache/zookeeper/lib/*:.cache/zookeeper/conf" \
#     org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg
#
# Idempotent: does nothing when the jars for the current pom.xml are already there.
# Needs java and mvn. Set FORCE=1 to fetch again.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pom="$root/tools/zookeeper/pom.xml"
cache="$root/.cache/zookeeper"
lib="$cache/lib"
conf="$cache/conf"
stamp="$lib/.pom.sha256"

for tool in java mvn; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "fetch.sh: $tool not found (Debian: apt-get install -y default-jre-headless maven)" >&2
		exit 1
	fi
done

mkdir -p "$conf"
cat >"$conf/logback.xml" <<'XML'
<configuration>
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder>
      <pattern>%d{ISO8601} [%thread] %-5level %logger{36} - %msg%n</pattern>
    </encoder>
  </appender>
  <root level="WARN">
    <appender-ref ref="STDERR"/>
  </root>
</configuration>
XML

want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -z "${FORCE:-}" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && compgen -G "$lib/zookeeper-[0-9]*.jar" >/dev/null; then
	echo "fetch.sh: ZooKeeper jars already in $lib"
	exit 0
fi

# Fetch into a fresh directory and move it into place, so an interrupted run leaves no half-filled lib/.
tmp="$cache/lib.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"
mvn -B -q -Dstyle.color=never -f "$pom" dependency:copy -DoutputDirectory="$tmp"
echo "$want" >"$tmp/.pom.sha256"
rm -rf "$lib"
mv "$tmp" "$lib"
echo "fetch.sh: fetched into $lib:"
ls "$lib"
