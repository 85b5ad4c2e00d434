// Kafka's own Java client (kafka-clients 3.9) driven by the Kafka-protocol tests
// (tests/helpers/kafka_clients.py compiles and runs it). One subcommand per run; every
// result is one JSON object per line on stdout; bytes (keys, values, header values) are base64.
//
//   KafkaTool produce  BOOTSTRAP TOPIC            records from stdin (below), one ack per line
//                                                 (-Ptransactional.id=T: in one transaction,
//                                                 committed, or aborted with --abort)
//   KafkaTool consume  BOOTSTRAP TOPIC[,T]        every partition from the start to the end
//   KafkaTool group    BOOTSTRAP GROUP TOPIC[,T]  subscribe, print, commit (--stdin-stop: until a
//                                                 stdin line; --max-records=N: N records)
//   KafkaTool eos      BOOTSTRAP GROUP IN OUT TXN consume-transform-produce in transactions
//   KafkaTool admin    BOOTSTRAP OP ARGS...       AdminClient calls (see admin())
//
// Options: -Pname=value sets a client property (compression.type, acks, isolation.level, ...);
// --name=value sets a tool option (--timeout-ms, --abort-rate, --seed, --idle-ms, ...).
// A produce input line ("!NAME=VALUE": the records after it are sent by a new producer with
// that property, e.g. "!compression.type=zstd"): PARTITION \t KEY \t VALUE \t TIMESTAMP \t HEADERS, where "-" is null
// (no partition: the partitioner's choice; no timestamp: the producer's clock), KEY and VALUE
// are base64, HEADERS is empty or comma-separated NAME_B64:VALUE_B64 pairs (VALUE "-": null).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTool {
    static final Map<String, String> props = new LinkedHashMap<>();
    static final Map<String, String> opts = new HashMap<>();
    static final Base64.Encoder B64 = Base64.getEncoder();
    static final Base64.Decoder UNB64 = Base64.getDecoder();

    public static void main(String[] argv) throws Exception {
        List<String> args = new ArrayList<>();
        for (String a : argv) {
            if (a.startsWith("-P")) {
                String[] kv = a.substring(2).split("=", 2);
                props.put(kv[0], kv.length > 1 ? kv[1] : "");
            } else if (a.startsWith("--")) {
                String[] kv = a.substring(2).split("=", 2);
                opts.put(kv[0], kv.length > 1 ? kv[1] : "true");
            } else {
                args.add(a);
            }
        }
        if (args.size() < 2) {
            System.err.println("usage: KafkaTool produce|consume|group|eos|admin BOOTSTRAP ...");
            System.exit(2);
        }
        String cmd = args.get(0);
        String bootstrap = args.get(1);
        List<String> rest = args.subList(2, args.size());
        try {
            switch (cmd) {
                case "produce": produce(bootstrap, rest.get(0)); break;
                case "consume": consume(bootstrap, rest.get(0)); break;
                case "group": group(bootstrap, rest.get(0), rest.get(1)); break;
                case "eos": eos(bootstrap, rest.get(0), rest.get(1), rest.get(2), rest.get(3)); break;
                case "admin": admin(bootstrap, rest); break;
                default:
                    System.err.println("unknown subcommand " + cmd);
                    System.exit(2);
            }
        } catch (Exception e) {
            Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            OUT.println(new J().s("error", c.getClass().getSimpleName())
                    .s("message", String.valueOf(c.getMessage())));
            OUT.flush();
            System.err.println("KafkaTool " + cmd + " failed: " + c);
            System.exit(1);
        }
        OUT.flush();
        System.exit(0);
    }

    static long opt(String name, long dflt) {
        return opts.containsKey(name) ? Long.parseLong(opts.get(name)) : dflt;
    }

    static Properties config(String bootstrap, Map<String, String> defaults) {
        Properties p = new Properties();
        p.putAll(defaults);
        p.put("bootstrap.servers", bootstrap);
        p.putAll(props);
        return p;
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, String> dflt) {
        Map<String, String> d = new HashMap<>(dflt);
        d.put("key.serializer", ByteArraySerializer.class.getName());
        d.put("value.serializer", ByteArraySerializer.class.getName());
        return new KafkaProducer<>(config(bootstrap, d));
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, String> dflt) {
        Map<String, String> d = new HashMap<>(dflt);
        d.put("key.deserializer", ByteArrayDeserializer.class.getName());
        d.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(config(bootstrap, d));
    }

    // ------------------------------------------------------------------ produce
    static void produce(String bootstrap, String topic) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        // runs of records, each sent by its own producer: a line "!NAME=VALUE" starts a new run
        // with that client property set (e.g. "!compression.type=zstd": one JVM, every codec)
        List<Map<String, String>> runProps = new ArrayList<>();
        List<List<ProducerRecord<byte[], byte[]>>> runs = new ArrayList<>();
        runProps.add(new HashMap<>());
        runs.add(new ArrayList<>());
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isEmpty()) continue;
            if (line.startsWith("!")) {
                String[] kv = line.substring(1).split("=", 2);
                Map<String, String> next = new HashMap<>(runProps.get(runProps.size() - 1));
                next.put(kv[0], kv[1]);
                runProps.add(next);
                runs.add(new ArrayList<>());
                continue;
            }
            String[] f = line.split("\t", -1);
            Integer partition = f[0].equals("-") ? null : Integer.valueOf(f[0]);
            byte[] key = f[1].equals("-") ? null : UNB64.decode(f[1]);
            byte[] value = f[2].equals("-") ? null : UNB64.decode(f[2]);
            Long ts = f[3].equals("-") ? null : Long.valueOf(f[3]);
            List<Header> headers = new ArrayList<>();
            if (f.length > 4 && !f[4].isEmpty()) {
                for (String h : f[4].split(",")) {
                    String[] kv = h.split(":", 2);
                    headers.add(new RecordHeader(new String(UNB64.decode(kv[0]), StandardCharsets.UTF_8),
                            kv[1].equals("-") ? null : UNB64.decode(kv[1])));
                }
            }
            runs.get(runs.size() - 1).add(new ProducerRecord<>(topic, partition, ts, key, value, headers));
        }
        for (int i = 0; i < runs.size(); i++) {
            if (runs.get(i).isEmpty()) continue;
            Map<String, String> d = new HashMap<>();
            d.put("enable.idempotence", "true");
            d.put("acks", "all");
            d.put("linger.ms", "5");
            d.putAll(runProps.get(i));
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            boolean txn = d.containsKey("transactional.id")
                    || props.containsKey("transactional.id");
            try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, d)) {
                if (txn) {  // the run in one transaction: committed, or (--abort) aborted
                    p.initTransactions();
                    p.beginTransaction();
                }
                for (ProducerRecord<byte[], byte[]> r : runs.get(i)) acks.add(p.send(r));
                p.flush();
                if (txn && opts.containsKey("abort")) p.abortTransaction();
                else if (txn) p.commitTransaction();
                for (Future<RecordMetadata> f : acks) {
                    RecordMetadata m = f.get();
                    OUT.println(new J().n("partition", m.partition()).n("offset", m.offset())
                            .n("timestamp", m.timestamp()));
                }
            }
        }
    }

    // ------------------------------------------------------------------ consume
    static J record(ConsumerRecord<byte[], byte[]> r) {
        List<String> hs = new ArrayList<>();
        for (Header h : r.headers()) {
            hs.add(new J().s("key", h.key()).b("value", h.value()).toString());
        }
        return new J().s("topic", r.topic()).n("partition", r.partition()).n("offset", r.offset())
                .b("key", r.key()).b("value", r.value()).raw("headers", "[" + String.join(",", hs) + "]")
                .n("timestamp", r.timestamp()).s("timestamp_type", r.timestampType().name);
    }

    static void consume(String bootstrap, String topic) throws Exception {  // TOPIC[,TOPIC...]
        Map<String, String> d = new HashMap<>();
        d.put("enable.auto.commit", "false");
        d.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, d)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : topic.split(",")) {
                for (PartitionInfo pi : c.partitionsFor(t, Duration.ofSeconds(30))) {
                    tps.add(new TopicPartition(t, pi.partition()));
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + opt("timeout-ms", 60000);
            long least = opt("min-records", 0);  // read on past the end until this many
            long seen = 0;
            emit(new J().s("event", "start").raw("end", offsetsJson(end)));
            while (true) {
                boolean done = seen >= least;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < end.get(tp)) done = false;
                }
                if (done) break;
                if (System.currentTimeMillis() > deadline) {
                    throw new TimeoutException("not at the end offsets " + end + " (or "
                            + least + " records) in time");
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    OUT.println(record(r));
                    seen++;
                }
                if (!recs.isEmpty()) OUT.flush();
            }
            emit(new J().s("event", "end").raw("end", offsetsJson(end)));
        }
    }

    static String offsetsJson(Map<TopicPartition, Long> offsets) {
        List<String> out = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
            out.add(new J().s("topic", e.getKey().topic()).n("partition", e.getKey().partition())
                    .n("offset", e.getValue()).toString());
        }
        return "[" + String.join(",", out) + "]";
    }

    static String partitionsJson(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            out.add(new J().s("topic", tp.topic()).n("partition", tp.partition()).toString());
        }
        return "[" + String.join(",", out) + "]";
    }

    /** With --stdin-stop: set when a line (or the end) arrives on stdin; the loop then stops
     *  and the client closes. */
    static AtomicBoolean stopOnStdin(Runnable wake) {
        AtomicBoolean stop = new AtomicBoolean();
        if (!opts.containsKey("stdin-stop")) return stop;
        Thread t = new Thread(() -> {
            try {
                System.in.read();
            } catch (Exception ignored) {
            }
            stop.set(true);
            wake.run();
        });
        t.setDaemon(true);
        t.start();
        return stop;
    }

    // ------------------------------------------------------------------ group
    static void group(String bootstrap, String groupId, String topics) throws Exception {
        Map<String, String> d = new HashMap<>();
        d.put("group.id", groupId);
        d.put("enable.auto.commit", "false");
        d.put("auto.offset.reset", "earliest");
        long max = opt("max-records", Long.MAX_VALUE);
        long seen = 0;
        KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, d);
        AtomicBoolean stop = stopOnStdin(c::wakeup);
        try {
            c.subscribe(Arrays.asList(topics.split(",")), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                    emit(new J().s("event", "revoked").raw("partitions", partitionsJson(ps)));
                }

                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    emit(new J().s("event", "assigned").raw("partitions", partitionsJson(ps))
                            .n("generation", c.groupMetadata().generationId()));
                }
            });
            while (!stop.get() && seen < max) {
                ConsumerRecords<byte[], byte[]> recs;
                try {
                    recs = c.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (recs.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    emit(record(r).s("event", "record"));  // (each at once: tests watch them)
                    commit.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1));
                    if (++seen >= max) break;
                }
                if (!opts.containsKey("no-commit")) {
                    Map<TopicPartition, Long> done = new HashMap<>();
                    commit.forEach((tp, om) -> done.put(tp, om.offset()));
                    try {
                        c.commitSync(commit);
                        emit(new J().s("event", "committed").raw("offsets", offsetsJson(done)));
                    } catch (CommitFailedException | RebalanceInProgressException e) {
                        // a rebalance took the partitions: their next owner reads them again
                        emit(new J().s("event", "commit-failed").raw("offsets", offsetsJson(done))
                                .s("error", e.getClass().getSimpleName()));
                    } catch (WakeupException e) {  // told to stop while committing: not committed
                        emit(new J().s("event", "commit-failed").raw("offsets", offsetsJson(done))
                                .s("error", e.getClass().getSimpleName()));
                        break;
                    }
                }
            }
        } finally {
            c.close(Duration.ofSeconds(30));
            emit(new J().s("event", "closed"));
        }
    }

    // stdout, buffered (a record a line: flushed per poll, an event at once)
    static final java.io.PrintStream OUT = new java.io.PrintStream(
            new java.io.BufferedOutputStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), 1 << 16),
            false, StandardCharsets.UTF_8);

    static synchronized void emit(J j) {
        OUT.println(j);
        OUT.flush();
    }

    // ------------------------------------------------------------------ exactly once
    // consume IN (read_committed) in GROUP, write each record to OUT with a header naming its
    // source ("src": "partition:offset"), commit the consumed offsets in the same transaction
    // (sendOffsetsToTransaction with the consumer's group metadata); abort --abort-rate of the
    // transactions at random (the consumer rewinds to what it read in them). Stops after
    // --idle-ms without records, or (--stdin-stop) on a stdin line.
    static void eos(String bootstrap, String groupId, String in, String out, String txnId) throws Exception {
        double abortRate = Double.parseDouble(opts.getOrDefault("abort-rate", "0"));
        Random rnd = new Random(opt("seed", 1));
        long idleMs = opt("idle-ms", 5000);
        Map<String, String> cd = new HashMap<>();
        cd.put("group.id", groupId);
        cd.put("enable.auto.commit", "false");
        cd.put("auto.offset.reset", "earliest");
        cd.put("isolation.level", "read_committed");
        Map<String, String> pd = new HashMap<>();
        pd.put("transactional.id", txnId);
        pd.put("linger.ms", "5");
        KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, cd);
        KafkaProducer<byte[], byte[]> p = producer(bootstrap, pd);
        AtomicBoolean stop = stopOnStdin(c::wakeup);
        long committed = 0, aborted = 0, records = 0;
        try {
            p.initTransactions();
            emit(new J().s("event", "ready"));
            // idle time counts from the last record or the last assignment (a join takes a while)
            long[] lastRecord = {Long.MAX_VALUE};
            long joinDeadline = System.currentTimeMillis() + opt("join-timeout-ms", 60000);
            c.subscribe(Collections.singletonList(in), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                }

                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    lastRecord[0] = System.currentTimeMillis();
                    emit(new J().s("event", "assigned").raw("partitions", partitionsJson(ps)));
                }
            });
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs;
                try {
                    recs = c.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (recs.isEmpty()) {
                    long now = System.currentTimeMillis();
                    if (lastRecord[0] == Long.MAX_VALUE && now > joinDeadline) {
                        throw new TimeoutException("no partitions assigned in time");
                    }
                    if (lastRecord[0] != Long.MAX_VALUE && now - lastRecord[0] > idleMs) break;
                    continue;
                }
                lastRecord[0] = System.currentTimeMillis();
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Map<TopicPartition, Long> first = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    ProducerRecord<byte[], byte[]> o = new ProducerRecord<>(out, null, r.key(), r.value());
                    o.headers().add("src", (r.partition() + ":" + r.offset()).getBytes(StandardCharsets.UTF_8));
                    p.send(o);
                    first.putIfAbsent(tp, r.offset());
                    next.put(tp, new OffsetAndMetadata(r.offset() + 1));
                }
                p.sendOffsetsToTransaction(next, c.groupMetadata());
                if (rnd.nextDouble() < abortRate) {
                    p.abortTransaction();
                    first.forEach(c::seek);  // read them again in the next transaction
                    aborted++;
                    emit(new J().s("event", "aborted").n("records", recs.count()));
                } else {
                    p.commitTransaction();
                    committed++;
                    records += recs.count();
                    Map<TopicPartition, Long> done = new HashMap<>();
                    next.forEach((tp, om) -> done.put(tp, om.offset()));
                    emit(new J().s("event", "committed").n("records", recs.count())
                            .raw("offsets", offsetsJson(done)));
                }
            }
        } finally {
            p.close(Duration.ofSeconds(30));
            c.close(Duration.ofSeconds(30));
        }
        emit(new J().s("event", "done").n("committed", committed).n("aborted", aborted)
                .n("records", records));
    }

    // ------------------------------------------------------------------ admin
    // admin BOOTSTRAP OP ARGS...: one call; admin BOOTSTRAP -: one call per stdin line (words
    // separated by spaces), each answered by one JSON line ({"error": ...} when it failed)
    static void admin(String bootstrap, List<String> a) throws Exception {
        Map<String, String> d = new HashMap<>();
        d.put("request.timeout.ms", "30000");
        d.put("default.api.timeout.ms", "60000");
        try (Admin admin = Admin.create(config(bootstrap, d))) {
            if (!a.get(0).equals("-")) {
                adminCall(admin, a);
                return;
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) continue;
                try {
                    adminCall(admin, Arrays.asList(line.trim().split(" +")));
                } catch (Exception e) {
                    Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                    OUT.println(new J().s("error", c.getClass().getSimpleName())
                            .s("message", String.valueOf(c.getMessage())));
                }
                OUT.flush();
            }
        }
    }

    static void adminCall(Admin admin, List<String> a) throws Exception {
        {
            String op = a.get(0);
            switch (op) {
                case "create-topic": {  // NAME PARTITIONS [KEY=VALUE ...]
                    Map<String, String> cfg = new HashMap<>();
                    for (String kv : a.subList(3, a.size())) {
                        String[] s = kv.split("=", 2);
                        cfg.put(s[0], s[1]);
                    }
                    NewTopic t = new NewTopic(a.get(1), Optional.of(Integer.parseInt(a.get(2))),
                            Optional.empty()).configs(cfg);
                    CreateTopicsResult r = admin.createTopics(Collections.singleton(t));
                    r.all().get();
                    OUT.println(new J().s("created", a.get(1))
                            .n("partitions", r.numPartitions(a.get(1)).get()));
                    break;
                }
                case "delete-topic": {
                    admin.deleteTopics(a.subList(1, a.size())).all().get();
                    OUT.println(new J().s("deleted", String.join(",", a.subList(1, a.size()))));
                    break;
                }
                case "create-partitions": {  // NAME TOTAL
                    admin.createPartitions(Collections.singletonMap(a.get(1),
                            NewPartitions.increaseTo(Integer.parseInt(a.get(2))))).all().get();
                    OUT.println(new J().s("topic", a.get(1)).n("partitions", Integer.parseInt(a.get(2))));
                    break;
                }
                case "list-topics": {
                    List<String> names = new ArrayList<>(admin.listTopics().names().get());
                    Collections.sort(names);
                    OUT.println(new J().raw("topics", strings(names)));
                    break;
                }
                case "describe-topic": {
                    TopicDescription t = admin.describeTopics(Collections.singleton(a.get(1)))
                            .allTopicNames().get().get(a.get(1));
                    List<String> ps = new ArrayList<>();
                    for (TopicPartitionInfo pi : t.partitions()) {
                        ps.add(new J().n("partition", pi.partition()).n("leader", pi.leader().id())
                                .n("replicas", pi.replicas().size()).n("isr", pi.isr().size()).toString());
                    }
                    OUT.println(new J().s("topic", t.name()).raw("partitions", "[" + String.join(",", ps) + "]"));
                    break;
                }
                case "describe-configs": {  // topic|broker NAME
                    ConfigResource res = resource(a.get(1), a.get(2));
                    Config cfg = admin.describeConfigs(Collections.singleton(res)).all().get().get(res);
                    J out = new J();
                    List<ConfigEntry> entries = new ArrayList<>(cfg.entries());
                    entries.sort(Comparator.comparing(ConfigEntry::name));
                    for (ConfigEntry e : entries) out.s(e.name(), e.value());
                    OUT.println(new J().raw("configs", out.toString()));
                    break;
                }
                case "alter-configs": {  // topic|broker NAME KEY=VALUE (empty VALUE: delete) ...
                    ConfigResource res = resource(a.get(1), a.get(2));
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (String kv : a.subList(3, a.size())) {
                        String[] s = kv.split("=", 2);
                        ops.add(s[1].isEmpty()
                                ? new AlterConfigOp(new ConfigEntry(s[0], null), AlterConfigOp.OpType.DELETE)
                                : new AlterConfigOp(new ConfigEntry(s[0], s[1]), AlterConfigOp.OpType.SET));
                    }
                    admin.incrementalAlterConfigs(Collections.singletonMap(res, ops)).all().get();
                    OUT.println(new J().s("altered", a.get(2)));
                    break;
                }
                case "delete-records": {  // TOPIC PARTITION BEFORE_OFFSET
                    TopicPartition tp = new TopicPartition(a.get(1), Integer.parseInt(a.get(2)));
                    DeletedRecords dr = admin.deleteRecords(Collections.singletonMap(tp,
                            RecordsToDelete.beforeOffset(Long.parseLong(a.get(3))))).lowWatermarks().get(tp).get();
                    OUT.println(new J().n("low_watermark", dr.lowWatermark()));
                    break;
                }
                case "list-offsets": {  // TOPIC PARTITION earliest|latest|max|TIMESTAMP
                    TopicPartition tp = new TopicPartition(a.get(1), Integer.parseInt(a.get(2)));
                    OffsetSpec spec = a.get(3).equals("earliest") ? OffsetSpec.earliest()
                            : a.get(3).equals("latest") ? OffsetSpec.latest()
                            : a.get(3).equals("max") ? OffsetSpec.maxTimestamp()
                            : OffsetSpec.forTimestamp(Long.parseLong(a.get(3)));
                    ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(
                            Collections.singletonMap(tp, spec),
                            new ListOffsetsOptions(IsolationLevel.valueOf(
                                    opts.getOrDefault("isolation", "READ_UNCOMMITTED"))))
                            .partitionResult(tp).get();
                    OUT.println(new J().n("offset", info.offset()).n("timestamp", info.timestamp()));
                    break;
                }
                case "list-transactions": {
                    List<String> out = new ArrayList<>();
                    for (TransactionListing t : admin.listTransactions().all().get()) {
                        out.add(new J().s("transactional_id", t.transactionalId())
                                .n("producer_id", t.producerId()).s("state", t.state().toString()).toString());
                    }
                    Collections.sort(out);
                    OUT.println(new J().raw("transactions", "[" + String.join(",", out) + "]"));
                    break;
                }
                case "describe-transactions": {  // ID ...
                    Map<String, TransactionDescription> m = admin.describeTransactions(a.subList(1, a.size())).all().get();
                    List<String> out = new ArrayList<>();
                    for (Map.Entry<String, TransactionDescription> e : m.entrySet()) {
                        TransactionDescription t = e.getValue();
                        out.add(new J().s("transactional_id", e.getKey()).s("state", t.state().toString())
                                .n("producer_id", t.producerId()).n("producer_epoch", t.producerEpoch())
                                .n("timeout_ms", t.transactionTimeoutMs())
                                .raw("partitions", partitionsJson(t.topicPartitions())).toString());
                    }
                    OUT.println(new J().raw("transactions", "[" + String.join(",", out) + "]"));
                    break;
                }
                case "describe-producers": {  // TOPIC PARTITION
                    TopicPartition tp = new TopicPartition(a.get(1), Integer.parseInt(a.get(2)));
                    DescribeProducersResult.PartitionProducerState st =
                            admin.describeProducers(Collections.singleton(tp)).partitionResult(tp).get();
                    List<String> out = new ArrayList<>();
                    for (ProducerState s : st.activeProducers()) {
                        out.add(new J().n("producer_id", s.producerId()).n("producer_epoch", s.producerEpoch())
                                .n("last_sequence", s.lastSequence())
                                .n("current_transaction_start_offset", s.currentTransactionStartOffset().orElse(-1L))
                                .toString());
                    }
                    OUT.println(new J().raw("producers", "[" + String.join(",", out) + "]"));
                    break;
                }
                case "list-groups": {
                    List<String> out = new ArrayList<>();
                    for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                        out.add(new J().s("group_id", g.groupId())
                                .s("state", g.state().map(Object::toString).orElse("")).toString());
                    }
                    Collections.sort(out);
                    OUT.println(new J().raw("groups", "[" + String.join(",", out) + "]"));
                    break;
                }
                case "describe-group": {  // ID
                    ConsumerGroupDescription g = admin.describeConsumerGroups(Collections.singleton(a.get(1)))
                            .describedGroups().get(a.get(1)).get();
                    List<String> members = new ArrayList<>();
                    for (MemberDescription m : g.members()) {
                        members.add(new J().s("member_id", m.consumerId()).s("client_id", m.clientId())
                                .raw("partitions", partitionsJson(m.assignment().topicPartitions())).toString());
                    }
                    OUT.println(new J().s("group_id", g.groupId()).s("state", g.state().toString())
                            .s("assignor", g.partitionAssignor())
                            .raw("members", "[" + String.join(",", members) + "]"));
                    break;
                }
                case "list-group-offsets": {  // ID
                    Map<TopicPartition, OffsetAndMetadata> m = admin.listConsumerGroupOffsets(a.get(1))
                            .partitionsToOffsetAndMetadata().get();
                    Map<TopicPartition, Long> out = new TreeMap<>(
                            Comparator.comparing(TopicPartition::topic).thenComparing(TopicPartition::partition));
                    m.forEach((tp, om) -> out.put(tp, om == null ? -1 : om.offset()));
                    OUT.println(new J().raw("offsets", offsetsJson(out)));
                    break;
                }
                case "delete-group": {  // ID
                    admin.deleteConsumerGroups(Collections.singleton(a.get(1))).all().get();
                    OUT.println(new J().s("deleted", a.get(1)));
                    break;
                }
                case "describe-cluster": {
                    DescribeClusterResult r = admin.describeCluster();
                    List<String> nodes = new ArrayList<>();
                    for (Node n : r.nodes().get()) {
                        nodes.add(new J().n("id", n.id()).s("host", n.host()).n("port", n.port()).toString());
                    }
                    OUT.println(new J().s("cluster_id", r.clusterId().get())
                            .n("controller", r.controller().get().id())
                            .raw("nodes", "[" + String.join(",", nodes) + "]"));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown admin operation " + op);
            }
        }
    }

    static ConfigResource resource(String kind, String name) {
        return new ConfigResource(kind.equals("broker") ? ConfigResource.Type.BROKER : ConfigResource.Type.TOPIC, name);
    }

    static String strings(Collection<String> xs) {
        List<String> out = new ArrayList<>();
        for (String x : xs) out.add(J.quote(x));
        return "[" + String.join(",", out) + "]";
    }

    /** A JSON object built field by field (no JSON library on the classpath). */
    static final class J {
        private final StringBuilder sb = new StringBuilder("{");

        private J key(String k) {
            if (sb.length() > 1) sb.append(',');
            sb.append(quote(k)).append(':');
            return this;
        }

        J s(String k, String v) {
            key(k);
            sb.append(v == null ? "null" : quote(v));
            return this;
        }

        J n(String k, long v) {
            key(k);
            sb.append(v);
            return this;
        }

        J b(String k, byte[] v) {
            key(k);
            sb.append(v == null ? "null" : quote(B64.encodeToString(v)));
            return this;
        }

        J raw(String k, String json) {
            key(k);
            sb.append(json);
            return this;
        }

        static String quote(String s) {
            StringBuilder q = new StringBuilder("\"");
            for (char ch : s.toCharArray()) {
                if (ch == '"' || ch == '\\') q.append('\\').append(ch);
                else if (ch < 0x20) q.append(String.format("\\u%04x", (int) ch));
                else q.append(ch);
            }
            return q.append('"').toString();
        }

        @Override
        public String toString() {
            return sb + "}";
        }
    }
}
