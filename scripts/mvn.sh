#!/usr/bin/env bash
# Run Maven for the project's small poms: the machine's `mvn` if present, else a Maven bootstrapped
# once from Maven Central into the vendor dir. Every artifact lands in the project-local repository
# <vendor>/m2, never in ~/.m2.
set -euo pipefail
vendor="${WIDEHOUSE_VENDOR_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.vendor}"
maven_version=3.9.9
if command -v mvn >/dev/null 2>&1; then
  mvn_bin=mvn
else
  mvn_bin="$vendor/maven/apache-maven-$maven_version/bin/mvn"
  if [ ! -x "$mvn_bin" ]; then
    command -v java >/dev/null 2>&1 || { echo "setup: no java on PATH; install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
    echo "setup: no mvn on PATH; fetching Apache Maven $maven_version from Maven Central" >&2
    mkdir -p "$vendor/maven"
    curl -fsSL "https://repo1.maven.org/maven2/org/apache/maven/apache-maven/$maven_version/apache-maven-$maven_version-bin.tar.gz" \
      | tar -xz -C "$vendor/maven"
  fi
fi
exec "$mvn_bin" -B -q -Dmaven.repo.local="$vendor/m2" "$@"
