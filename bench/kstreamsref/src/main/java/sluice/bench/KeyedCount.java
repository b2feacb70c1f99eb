package sluice.bench;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * The keyed running count of bench/kafka on Kafka Streams: for each input
 * record (its key, a value whose first 8 bytes are the producer's send
 * time in Unix nanoseconds) it writes the key with a 16-byte value, the
 * key's count so far and the send time, both big-endian, exactly as the
 * Sluice job does. Exactly once (exactly_once_v2), the count in a
 * persistent (RocksDB) store with its changelog, one stream thread per
 * unit of parallelism; every other setting is Kafka Streams' default.
 *
 * <p>Flags: -bootstrap host:port, -in topic, -out topic, -app-id id,
 * -state-dir dir, -commit-interval-ms n (Kafka Streams' default under
 * exactly once, 100), -threads n. It prints "RUNNING" once the instance
 * runs and stops on SIGTERM.
 */
public final class KeyedCount {
    private KeyedCount() {}

    static final String STORE = "counts";

    static final class Count implements Processor<Bytes, byte[], Bytes, byte[]> {
        private ProcessorContext<Bytes, byte[]> ctx;
        private KeyValueStore<Bytes, Long> counts;

        @Override
        public void init(ProcessorContext<Bytes, byte[]> ctx) {
            this.ctx = ctx;
            this.counts = ctx.getStateStore(STORE);
        }

        @Override
        public void process(Record<Bytes, byte[]> r) {
            Long n = counts.get(r.key());
            long c = n == null ? 1 : n + 1;
            counts.put(r.key(), c);
            ByteBuffer v = ByteBuffer.allocate(16);
            v.putLong(c);
            v.put(r.value(), 0, 8);
            ctx.forward(r.withValue(v.array()));
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("-")) {
                throw new IllegalArgumentException("flag " + args[i] + ": want -name value pairs");
            }
            flags.put(args[i].substring(1), args[i + 1]);
        }
        for (String f : new String[] {"bootstrap", "in", "out", "app-id", "state-dir"}) {
            if (!flags.containsKey(f)) {
                throw new IllegalArgumentException("flag -" + f + " is required");
            }
        }
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, flags.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, flags.get("bootstrap"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(flags.getOrDefault("commit-interval-ms", "100")));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(flags.getOrDefault("threads", "2")));
        p.put(StreamsConfig.STATE_DIR_CONFIG, flags.get("state-dir"));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1); // one broker
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StoreBuilder<KeyValueStore<Bytes, Long>> store =
                Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE), Serdes.Bytes(), Serdes.Long());
        ProcessorSupplier<Bytes, byte[], Bytes, byte[]> count = new ProcessorSupplier<>() {
            @Override
            public Processor<Bytes, byte[], Bytes, byte[]> get() {
                return new Count();
            }

            @Override
            public Set<StoreBuilder<?>> stores() {
                return Set.of(store);
            }
        };
        StreamsBuilder b = new StreamsBuilder();
        b.stream(flags.get("in"), Consumed.with(Serdes.Bytes(), Serdes.ByteArray()))
                .process(count)
                .to(flags.get("out"), Produced.with(Serdes.Bytes(), Serdes.ByteArray()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("RUNNING");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("kstreamsref: " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
        if (streams.state() == KafkaStreams.State.ERROR) {
            System.exit(1);
        }
    }
}
