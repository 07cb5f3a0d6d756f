// A long-running Apache RocketMQ client for the interop tests (tests/interop/rocketmq.py): one JVM
// per RocketMQ version plays mqadmin, producer and consumer, so each step costs a method call
// rather than a JVM start. Compiled by the tests against the real rocketmq-client and
// rocketmq-tools jars of that version (4.9 and 5.x share these classes' names).
//
// Protocol, one command per line on stdin, tab-separated:
//   admin <arg>...                      mqadmin (MQAdminStartup.main0) with these arguments
//   produce <namesrv> <topic> <count>   send <count> messages; a line per message:
//                                       "sent <brokerName> <queueId> <body>" or "failed <error>"
//   consume <namesrv> <topic> <group> <count> <timeoutMs>
//                                       a new consumer group from the first offset; "got <body>" lines
//   route <namesrv> <topic>             "<millis> <TopicRouteData JSON>": the route as the client decoded it
//   kvget <namesrv> <namespace> <key>   the KV value, or "null"
// Each answer ends with the line "\u0000END <status>", status 0 for done and 1 for an exception
// (whose text precedes it). Everything the libraries print goes to stderr.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public final class RocketDriver {
    private static PrintStream answers;

    public static void main(String[] args) throws Exception {
        answers = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        answers.println("\u0000READY");
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.split("\t", -1);
            int status = 0;
            try {
                String out = run(words);
                answers.print(out.isEmpty() || out.endsWith("\n") ? out : out + "\n");
            } catch (Throwable e) {
                status = 1;
                answers.println(e.toString().replace('\n', ' '));
            }
            answers.println("\u0000END " + status);
        }
    }

    private static String run(String[] w) throws Exception {
        switch (w[0]) {
            case "admin": return admin(Arrays.copyOfRange(w, 1, w.length));
            case "produce": return produce(w[1], w[2], Integer.parseInt(w[3]));
            case "consume": return consume(w[1], w[2], w[3], Integer.parseInt(w[4]), Long.parseLong(w[5]));
            case "route": return route(w[1], w[2]);
            case "kvget": return kvget(w[1], w[2], w[3]);
            default: throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }

    private static synchronized String admin(String[] args) {
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream before = System.out;
        System.setOut(new PrintStream(captured, true));
        try {
            MQAdminStartup.main0(args, null);
        } finally {
            System.out.flush();
            System.setOut(before);
        }
        // 5.x's shaded logback prints its status lines on stdout when it first starts
        return captured.toString().replaceAll("(?m)^\\d\\d:\\d\\d:\\d\\d,\\d{3} \\|-.*\\R", "");
    }

    private static String produce(String namesrv, String topic, int count) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("interop-producer-" + UUID.randomUUID());
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(UUID.randomUUID().toString());
        producer.setSendMsgTimeout(5000);
        producer.start();
        StringBuilder out = new StringBuilder();
        try {
            for (int i = 0; i < count; i++) {
                String body = topic + "-" + i + "-" + UUID.randomUUID();
                try {
                    SendResult r = producer.send(new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
                    out.append("sent ").append(r.getMessageQueue().getBrokerName()).append(' ')
                       .append(r.getMessageQueue().getQueueId()).append(' ').append(body).append('\n');
                } catch (Exception e) {
                    out.append("failed ").append(e.toString().replace('\n', ' ')).append('\n');
                }
            }
        } finally {
            producer.shutdown();
        }
        return out.toString();
    }

    private static String consume(String namesrv, String topic, String group, int count, long timeoutMs)
            throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(UUID.randomUUID().toString());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.start();
        StringBuilder out = new StringBuilder();
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        try {
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = consumer.poll(500);
                for (MessageExt m : batch) {
                    String body = new String(m.getBody(), StandardCharsets.UTF_8);
                    if (seen.add(body)) {
                        out.append("got ").append(body).append('\n');
                    }
                }
            }
        } finally {
            consumer.shutdown();
        }
        return out.toString();
    }

    private static String route(String namesrv, String topic) throws Exception {
        DefaultMQAdminExt admin = startedAdmin(namesrv);
        try {
            Object route = admin.examineTopicRouteInfo(topic);
            long at = System.currentTimeMillis();
            Object json = route.getClass().getMethod("toJson", boolean.class).invoke(route, false);
            return at + " " + json + "\n";
        } finally {
            admin.shutdown();
        }
    }

    private static String kvget(String namesrv, String namespace, String key) throws Exception {
        DefaultMQAdminExt admin = startedAdmin(namesrv);
        try {
            return admin.getKVConfig(namespace, key) + "\n";
        } catch (Exception e) {
            return "null\n";
        } finally {
            admin.shutdown();
        }
    }

    private static DefaultMQAdminExt startedAdmin(String namesrv) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName(UUID.randomUUID().toString());
        admin.start();
        return admin;
    }
}
