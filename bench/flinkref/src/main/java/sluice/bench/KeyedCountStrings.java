package sluice.bench;

import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * Issue 18's throughput job on Flink, the counterpart of bench/keyedcount:
 * datagen of 1 KiB strings whose first 8 bytes are one of 10 000 keys,
 * keyBy(the prefix), a running count in keyed ValueState (heap backend),
 * discard; parallelism 2 on the local mini-cluster. It prints the wall
 * time of execute() and the records per second.
 *
 * <pre>java -jar target/flinkref.jar -records 30000000 [-parallelism 2] [-checkpoint-interval-ms 1000]</pre>
 */
public final class KeyedCountStrings {
    static final int RECORD_SIZE = 1024;
    static final int KEY_PREFIX = 8;
    static final long KEYS = 10_000;

    /** Record i: its key in 8 decimal digits, then letters from a fixed random body. */
    static final class Gen implements GeneratorFunction<Long, String> {
        private transient byte[] body;

        @Override
        public void open(org.apache.flink.api.connector.source.SourceReaderContext ctx) {
            SplittableRandom r = new SplittableRandom(1);
            body = new byte[(1 << 16) + RECORD_SIZE];
            for (int i = 0; i < body.length; i++) {
                body[i] = (byte) ('a' + r.nextInt(26));
            }
        }

        @Override
        public String map(Long index) {
            long i = index;
            byte[] b = new byte[RECORD_SIZE];
            long k = (i * 7919) % KEYS;
            for (int j = KEY_PREFIX - 1; j >= 0; j--) {
                b[j] = (byte) ('0' + (k % 10));
                k /= 10;
            }
            int off = (int) (i * 61) & ((1 << 16) - 1);
            System.arraycopy(body, off, b, KEY_PREFIX, RECORD_SIZE - KEY_PREFIX);
            return new String(b, StandardCharsets.ISO_8859_1);
        }
    }

    /** The running count per key, emitted for every record. */
    static final class Count extends KeyedProcessFunction<String, String, Long> {
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(String value, Context ctx, Collector<Long> out) throws Exception {
            Long n = count.value();
            long next = n == null ? 1 : n + 1;
            count.update(next);
            out.collect(next);
        }
    }

    public static void main(String[] args) throws Exception {
        long records = 30_000_000L;
        int parallelism = 2;
        long interval = 0;
        String dir = System.getProperty("java.io.tmpdir") + "/flinkref-checkpoints";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "-records" -> records = Long.parseLong(args[i + 1]);
                case "-parallelism" -> parallelism = Integer.parseInt(args[i + 1]);
                case "-checkpoint-interval-ms" -> interval = Long.parseLong(args[i + 1]);
                case "-checkpoint-dir" -> dir = args[i + 1];
                default -> throw new IllegalArgumentException("unknown flag " + args[i]);
            }
        }
        Configuration conf = new Configuration();
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + dir);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);
        if (interval > 0) {
            env.enableCheckpointing(interval);
        }
        DataGeneratorSource<String> src =
                new DataGeneratorSource<>(new Gen(), records, RateLimiterStrategy.noOp(), Types.STRING);
        env.fromSource(src, WatermarkStrategy.noWatermarks(), "datagen")
                .keyBy(s -> s.substring(0, KEY_PREFIX))
                .process(new Count())
                .name("count")
                .sinkTo(new DiscardingSink<>());
        long start = System.nanoTime();
        env.execute("keyed-count-strings");
        double secs = (System.nanoTime() - start) / 1e9;
        System.out.printf("flink records=%d parallelism=%d seconds=%.3f records/s=%.0f%n",
                records, parallelism, secs, records / secs);
    }
}
