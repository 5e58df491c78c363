#!/usr/bin/env bash
# Runs the conformance suite (Go tests with build tag "conformance") against a
# real Apache Kafka 4.3.1 broker and the Java fixtures in conformance/java/;
# or, with --broker-only, starts the broker alone (make broker), or the suite's
# 3-node rack cluster with --broker-only --cluster (make cluster), until Ctrl-C.
#
#   conformance/run.sh                      the suite
#   conformance/run.sh --broker-only        one broker: steps 1 and 3, then waits
#   conformance/run.sh --broker-only --cluster
#                                           three nodes, racks az-a, az-b, az-c,
#                                           plaintext (brokerctl cluster), then waits
#
#   1. checks for go, java (17+), javac, mvn, flock and setsid (--broker-only:
#      go, java, mvn, and setsid for --cluster); any missing tool fails the run,
#      with or without CI=true;
#   2. builds every Maven project conformance/java/*/pom.xml (mvn package) and
#      writes its runtime classpath to conformance/java/<name>/target/classpath.txt;
#   3. unless AZKAFKA_CONFORMANCE_BROKERS is set: resolves the broker's jars with
#      conformance/kafka/pom.xml into the local Maven repository (~/.m2 by default),
#      formats a single-node KRaft (broker+controller) log dir in a temp dir and
#      starts kafka.Kafka on free loopback ports; then waits until the broker
#      answers a Metadata request;
#   4. runs `go test -tags conformance -count=1 -timeout 40m -parallel 16 -v ./conformance/...`
#      (with CONFORMANCE_BENCH set, the benchmarks instead: see below) with
#      AZKAFKA_CONFORMANCE_BROKERS and AZKAFKA_CONFORMANCE_JAVA_DIR exported
#      (and AZKAFKA_CONFORMANCE_BROKER_CLASSPATH, the file holding the broker's
#      java classpath, when step 3 resolved it: tests that start a broker of
#      their own use it), and exits with its status.
# The broker is stopped on exit, on failure and on Ctrl-C (SIGINT/SIGTERM);
# if this script is SIGKILLed, a watchdog stops the broker and the tests. On
# failure the tail of the broker log is printed and the temp dir is kept.
#
# --broker-only prints the bootstrap address, the broker's pid and log, and
# stays in the foreground until Ctrl-C (or SIGTERM to this script, or the
# broker's own exit: kill PID stops it); it then stops the broker, deletes its
# temp dir (data and logs) and exits 0. A broker that dies on its own is a
# failure (status 1, log tail printed, temp dir kept). The cluster is run by
# `brokerctl cluster`, the Go code the suite's cluster tests start theirs with.
# AZKAFKA_CONFORMANCE_BROKERS is ignored there.
#
# Environment:
#   AZKAFKA_CONFORMANCE_BROKERS  host:port[,host:port] of your own broker: no broker is started
#   CONFORMANCE_RUN              passed to go test -run (a regexp of test names)
#   CONFORMANCE_MVN_FLAGS        extra flags for every mvn call, e.g. -Dmaven.repo.local=/cache/m2
#   CONFORMANCE_BROKER_TIMEOUT   seconds to wait for the broker to answer (default 120)
#   CONFORMANCE_BENCH            runs benchmarks instead of the tests: a regexp of benchmark
#                                names, passed to go test -bench with -run '^$' -benchmem,
#                                -timeout 120m and no -v, on ./conformance only; e.g.
#                                  CONFORMANCE_BENCH=BenchmarkReader CONFORMANCE_BENCH_COUNT=5 \
#                                    ./conformance/run.sh > /tmp/bench.txt
#                                  go run golang.org/x/perf/cmd/benchstat@latest -col /engine /tmp/bench.txt
#                                Unset (the default, and CI), no benchmark runs.
#   CONFORMANCE_BENCH_COUNT      go test -count of a benchmark run (default 1)
#   CONFORMANCE_BENCH_TIME       go test -benchtime of a benchmark run (default go test's 1s;
#                                BenchmarkReader* read a whole topic per iteration: 1x is one)
#   CONFORMANCE_BENCH_FLAGS      more go test flags for a benchmark run, split on spaces, e.g.
#                                  -cpuprofile=/tmp/cpu.out -memprofile=/tmp/mem.out
#                                (absolute paths; the test binary goes to the temp dir, not
#                                the work tree: profiles carry their symbols)
#   AZKAFKA_CONFORMANCE_BENCH_MESSAGES  messages in the topic BenchmarkReader* read
#                                (default 1200000; fewer for a quick run)
#
# shellcheck disable=SC2317 # functions called from traps are not unreachable
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
conf="$root/conformance"
kafka_version=4.3.1
broker_timeout="${CONFORMANCE_BROKER_TIMEOUT:-120}"
# -q: errors only; -B -ntp: no colours, no download progress.
read -r -a extra_mvn_flags <<<"${CONFORMANCE_MVN_FLAGS:-}"
mvn_flags=(-q -B -ntp -Dstyle.color=never "${extra_mvn_flags[@]}")
dependency_plugin=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

work=""
broker_pid=""
test_pid=""
cluster_pid=""
watchdog_pid=""
broker_only=""
cluster=""

log() { echo "conformance: $*"; }
fail() {
	echo "conformance: FAIL: $*" >&2
	exit 1
}
millis() { date +%s%3N; }
seconds_since() { # start-millis -> "1.234s"
	local d=$(($(millis) - $1))
	printf '%d.%03ds' $((d / 1000)) $((d % 1000))
}

stop_broker() {
	[ -n "$broker_pid" ] || return 0
	if kill -0 "$broker_pid" 2>/dev/null; then
		# SIGTERM runs the broker's controlled shutdown; SIGKILL after 30 s.
		kill -TERM "$broker_pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 150; i++)); do
			kill -0 "$broker_pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$broker_pid" 2>/dev/null; then
			log "broker (pid $broker_pid) ignored SIGTERM for 30s; sending SIGKILL"
			kill -KILL "$broker_pid" 2>/dev/null || true
		fi
	fi
	wait "$broker_pid" 2>/dev/null || true
	log "broker (pid $broker_pid) stopped"
	broker_pid=""
	rm -f "$work/broker.pid"
}

print_broker_log() {
	[ -n "$work" ] || return 0
	local f
	for f in "$work/logs/server.log" "$work/broker.out"; do
		if [ -s "$f" ]; then
			echo "---- last 40 lines of $f"
			tail -n 40 "$f"
		fi
	done
}

cleanup() {
	local rc=$?
	# Finish cleaning up even if Ctrl-C is pressed again.
	trap - EXIT
	trap '' INT TERM
	# --broker-only runs until Ctrl-C or SIGTERM: that is its way to stop.
	if [ -n "$broker_only" ] && { [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; }; then
		rc=0
	fi
	if [ -n "$test_pid" ] && kill -0 "$test_pid" 2>/dev/null; then
		# go test runs in its own process group: this also stops the test
		# binary and any Java fixture it started.
		kill -TERM -- "-$test_pid" 2>/dev/null || true
		wait "$test_pid" 2>/dev/null || true
	fi
	if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
		# brokerctl stops its nodes (controlled shutdown, then SIGKILL) and exits.
		kill -TERM "$cluster_pid" 2>/dev/null || true
		wait "$cluster_pid" 2>/dev/null || true
	fi
	stop_broker
	if [ -n "$watchdog_pid" ]; then
		kill -KILL "$watchdog_pid" 2>/dev/null || true
		wait "$watchdog_pid" 2>/dev/null || true
	fi
	if [ -n "$work" ]; then
		if [ "$rc" -ne 0 ]; then
			print_broker_log
			log "kept $work for inspection (broker config, data, logs/server.log, mvn logs)"
		else
			rm -rf "$work"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_broker() { # sets broker_pid and brokers; returns 1 if the JVM exits during startup
	local ports broker_port controller_port cluster_id
	mapfile -t ports < <("$work/brokerctl" ports 2)
	[ "${#ports[@]}" -eq 2 ] || fail "picking free ports"
	broker_port=${ports[0]}
	controller_port=${ports[1]}
	brokers="127.0.0.1:$broker_port"
	rm -rf "$work/data" "$work/logs"
	mkdir -p "$work/logs"
	sed -e "s|@BROKER_PORT@|$broker_port|g" -e "s|@CONTROLLER_PORT@|$controller_port|g" \
		-e "s|@DATA_DIR@|$work/data|g" "$conf/kafka/server.properties.in" >"$work/server.properties"
	cluster_id="$("$work/brokerctl" cluster-id)"
	local jvm=(java -Djava.awt.headless=true -Dkafka.logs.dir="$work/logs"
		-Dlog4j2.configurationFile="$conf/kafka/log4j2.properties" -cp "$(cat "$work/broker.classpath")")
	if ! "${jvm[@]}" -Xmx256m kafka.tools.StorageTool format --standalone \
		-t "$cluster_id" -c "$work/server.properties" >"$work/format.log" 2>&1; then
		cat "$work/format.log"
		fail "kafka.tools.StorageTool format failed"
	fi
	local t0
	t0=$(millis)
	"${jvm[@]}" -Xms512m -Xmx512m -XX:+UseG1GC kafka.Kafka "$work/server.properties" \
		</dev/null >"$work/broker.out" 2>&1 &
	broker_pid=$!
	echo "$broker_pid" >"$work/broker.pid"
	local deadline=$((SECONDS + broker_timeout))
	until "$work/brokerctl" wait -timeout 2s "$brokers" >/dev/null 2>"$work/wait.err"; do
		if ! kill -0 "$broker_pid" 2>/dev/null; then
			wait "$broker_pid" 2>/dev/null || true
			broker_pid=""
			rm -f "$work/broker.pid"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			fail "broker at $brokers did not answer Metadata within ${broker_timeout}s: $(cat "$work/wait.err")"
		fi
	done
	log "Apache Kafka $kafka_version broker (pid $broker_pid) at $brokers, controller 127.0.0.1:$controller_port: answered Metadata $(seconds_since "$t0") after JVM start"
}

# ---- the steps; main and broker_main run them.

check_tools() { # tool... ; fails naming the missing ones, checks java's version
	local missing=() tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		fail "not found on PATH: ${missing[*]}. The conformance suite needs Go, a JDK 17+ (java, javac), Maven (mvn) and util-linux (flock, setsid); on Debian/Ubuntu: apt-get install openjdk-17-jdk-headless maven util-linux (or run .ci/run)."
	fi
	local java_version
	java_version="$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ {print $2}')"
	if ! [[ "$java_version" =~ ^[0-9]+$ ]] || [ "$java_version" -lt 17 ]; then
		fail "java $(command -v java) is version \"$java_version\"; Kafka $kafka_version needs Java 17 or newer."
	fi
	log "go $(go env GOVERSION), java $java_version ($(command -v java)), $(mvn -v 2>/dev/null | head -n 1 | sed 's/\x1b\[[0-9;]*m//g')"
}

make_work() { # sets work: the temp dir; starts the watchdog; builds brokerctl into it
	work="$(mktemp -d "${TMPDIR:-/tmp}/azkafka-conformance.XXXXXX")"

	# If this script is killed with SIGKILL its traps cannot run: a watchdog then
	# stops the broker, the cluster and the tests, whose pids are in $work/*.pid.
	(
		trap '' INT # Ctrl-C goes to the whole process group; the EXIT trap handles it.
		while kill -0 $$ 2>/dev/null; do sleep 1; done
		[ -s "$work/test.pid" ] && kill -TERM -- "-$(cat "$work/test.pid")" 2>/dev/null
		if [ -s "$work/cluster.pid" ]; then
			pid="$(cat "$work/cluster.pid")"
			kill -TERM -- "-$pid" 2>/dev/null && sleep 30 && kill -KILL -- "-$pid" 2>/dev/null
		fi
		if [ -s "$work/broker.pid" ]; then
			pid="$(cat "$work/broker.pid")"
			kill -TERM "$pid" 2>/dev/null && sleep 30 && kill -KILL "$pid" 2>/dev/null
		fi
	) </dev/null >/dev/null 2>&1 &
	watchdog_pid=$!
	(cd "$root" && go build -o "$work/brokerctl" ./conformance/cmd/brokerctl) || fail "building conformance/cmd/brokerctl"
}

build_fixtures() { # mvn package of every conformance/java/*/pom.xml
	local pom dir name t0
	for pom in "$conf"/java/*/pom.xml; do
		[ -e "$pom" ] || continue
		dir="$(dirname "$pom")"
		name="$(basename "$dir")"
		t0=$(millis)
		# Two runs at once (say, two checkouts' worth of terminals) take turns
		# building a project instead of writing target/ together.
		mkdir -p "$dir/target"
		if ! (cd "$dir" && flock 9 && mvn "${mvn_flags[@]}" -DskipTests package \
			"$dependency_plugin:build-classpath" -Dmdep.includeScope=runtime \
			-Dmdep.outputFile="$dir/target/classpath.txt") 9>"$dir/target/.build.lock" >"$work/mvn-$name.log" 2>&1; then
			tail -n 60 "$work/mvn-$name.log"
			fail "mvn package failed for conformance/java/$name (full log: $work/mvn-$name.log)"
		fi
		[ -f "$dir/target/classpath.txt" ] || fail "conformance/java/$name: mvn wrote no target/classpath.txt"
		log "built conformance/java/$name in $(seconds_since "$t0")"
	done
}

resolve_broker() { # writes the broker's classpath to $work/broker.classpath
	local t0
	t0=$(millis)
	if ! (cd "$conf/kafka" && mvn "${mvn_flags[@]}" "$dependency_plugin:build-classpath" \
		-Dmdep.includeScope=runtime -Dmdep.outputFile="$work/broker.classpath") >"$work/mvn-kafka.log" 2>&1; then
		tail -n 60 "$work/mvn-kafka.log"
		fail "resolving Apache Kafka $kafka_version from Maven Central (conformance/kafka/pom.xml) failed"
	fi
	log "resolved Apache Kafka $kafka_version jars in $(seconds_since "$t0")"
}

start_broker_retrying() { # start_broker, on new ports when one was taken meanwhile
	local attempt
	for attempt in 1 2 3; do
		start_broker && return 0
		if [ "$attempt" -lt 3 ] && grep -q 'Address already in use' "$work/logs/server.log" "$work/broker.out" 2>/dev/null; then
			log "a port was taken before the broker bound it; retrying with new ports"
			continue
		fi
		fail "the broker exited during startup"
	done
}

# --broker-only: the broker (or the cluster) alone, in the foreground.
broker_main() {
	if [ -n "$cluster" ]; then
		check_tools go java mvn setsid
	else
		check_tools go java mvn
	fi
	make_work
	resolve_broker
	local rc=0
	if [ -n "$cluster" ]; then
		# A process group of its own (its JVMs in it), for the watchdog; Ctrl-C
		# reaches this script, whose cleanup stops brokerctl.
		(cd "$root" && exec setsid "$work/brokerctl" cluster -classpath "$work/broker.classpath" \
			-conf "$conf/kafka" -dir "$work/cluster") &
		cluster_pid=$!
		echo "$cluster_pid" >"$work/cluster.pid"
		wait "$cluster_pid" || rc=$?
		cluster_pid=""
		rm -f "$work/cluster.pid"
		exit "$rc"
	fi
	start_broker_retrying
	log "bootstrap: $brokers"
	log "pid $broker_pid, log $work/logs/server.log; data deleted when it stops"
	log "stop: Ctrl-C here, or kill $broker_pid"
	wait "$broker_pid" || rc=$?
	broker_pid=""
	rm -f "$work/broker.pid"
	# SIGTERM (kill PID) is Kafka's controlled shutdown: the JVM exits with 143.
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 143 ]; then
		log "broker stopped (exit status $rc)"
		exit 0
	fi
	fail "the broker exited with status $rc"
}

usage() {
	sed -n '2,/^# shellcheck/{/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0"
}

# The whole run is one function, so bash has parsed all of it before it
# starts: editing this file cannot disturb a run in progress.
main() {
	local arg
	for arg in "$@"; do
		case "$arg" in
		--broker-only) broker_only=1 ;;
		--cluster) cluster=1 ;;
		-h | --help)
			usage
			exit 0
			;;
		*)
			echo "conformance: unknown argument \"$arg\" (want --broker-only [--cluster]); see $0 --help" >&2
			exit 2
			;;
		esac
	done
	if [ -n "$cluster" ] && [ -z "$broker_only" ]; then
		echo "conformance: --cluster goes with --broker-only (the suite starts its clusters itself)" >&2
		exit 2
	fi
	[[ "$broker_timeout" =~ ^[1-9][0-9]{0,4}$ ]] ||
		fail "CONFORMANCE_BROKER_TIMEOUT=\"${broker_timeout:0:40}\": want a whole number of seconds (1-99999)"
	if [ -n "$broker_only" ]; then
		broker_main
	fi

	# ---- 1. tools
	check_tools go java javac mvn flock setsid
	make_work

	# ---- 2. Java fixtures
	build_fixtures

	# ---- 3. broker

	if [ -n "${AZKAFKA_CONFORMANCE_BROKERS:-}" ]; then
		brokers="$AZKAFKA_CONFORMANCE_BROKERS"
		log "using the broker(s) in AZKAFKA_CONFORMANCE_BROKERS=$brokers; not starting one"
		"$work/brokerctl" wait -timeout 30s "$brokers" ||
			fail "AZKAFKA_CONFORMANCE_BROKERS=\"$brokers\": no broker answered a Metadata request within 30s"
	else
		resolve_broker
		start_broker_retrying
	fi
	# ---- 4. tests
	export AZKAFKA_CONFORMANCE_BROKERS="$brokers"
	export AZKAFKA_CONFORMANCE_JAVA_DIR="$conf/java"
	if [ -s "$work/broker.classpath" ]; then
		export AZKAFKA_CONFORMANCE_BROKER_CLASSPATH="$work/broker.classpath"
	fi
	if [ -n "${CONFORMANCE_BENCH:-}" ]; then
		bench_count="${CONFORMANCE_BENCH_COUNT:-1}"
		[[ "$bench_count" =~ ^[1-9][0-9]{0,3}$ ]] ||
			fail "CONFORMANCE_BENCH_COUNT=\"${bench_count:0:40}\": want a whole number (1-9999)"
		test_args=(-tags conformance -run '^$' -bench "$CONFORMANCE_BENCH" -benchmem -count "$bench_count" -timeout 120m
			-o "$work/conformance.test")
		[ -z "${CONFORMANCE_BENCH_TIME:-}" ] || test_args+=(-benchtime "$CONFORMANCE_BENCH_TIME")
		read -r -a bench_flags <<<"${CONFORMANCE_BENCH_FLAGS:-}"
		test_args+=("${bench_flags[@]}")
		test_args+=(./conformance)
	else
		# -parallel 16: every test of the two lanes (clusterLane in
		# harness_test.go) waits for its lane holding a slot of go test's.
		test_args=(-tags conformance -count=1 -timeout 40m -parallel 16 -v)
		[ -z "${CONFORMANCE_RUN:-}" ] || test_args+=(-run "$CONFORMANCE_RUN")
		test_args+=(./conformance/...)
	fi
	log "go test ${test_args[*]}"
	t0=$(millis)
	# A process group of its own, so cleanup can stop go test, the test binary and
	# the Java fixtures together; `wait` lets the INT/TERM traps run at once.
	(cd "$root" && exec setsid go test "${test_args[@]}") &
	test_pid=$!
	echo "$test_pid" >"$work/test.pid"
	rc=0
	wait "$test_pid" || rc=$?
	test_pid=""
	rm -f "$work/test.pid"
	log "go test finished in $(seconds_since "$t0") with exit status $rc"
	exit "$rc"
}

main "$@"
