import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * The official RocketMQ 5 gRPC client (rocketmq-client-java) through a rocketmq-proxy.
 * Usage: GrpcClient ENDPOINT TOPIC GROUP COUNT [TIMEOUT_SECONDS].
 * Sends COUNT messages with keys key-0..COUNT-1 ("SENT key messageId" each), then receives with a
 * SimpleConsumer of GROUP, acknowledging each ("RECV key messageId"), until every sent key came or the
 * timeout passed; prints "DONE sent=X received=Y" and exits 0 only when every sent key was received.
 */
public class GrpcClient {
    public static void main(String[] args) throws Exception {
        String endpoint = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        long timeoutMs = (args.length > 4 ? Long.parseLong(args[4]) : 90) * 1000;
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint).enableSsl(false).setRequestTimeout(Duration.ofSeconds(10)).build();
        Set<String> sent = new TreeSet<>();
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
            for (int i = 0; i < count; i++) {
                String key = "key-" + i;
                Message msg = provider.newMessageBuilder().setTopic(topic).setKeys(key).setTag("test")
                    .setBody(("body of " + key).getBytes(StandardCharsets.UTF_8)).build();
                try {
                    SendReceipt receipt = producer.send(msg);
                    System.out.println("SENT " + key + " " + receipt.getMessageId());
                    sent.add(key);
                } catch (Exception e) {
                    System.out.println("FAIL " + key + " " + e.getClass().getName() + ": " + e.getMessage());
                }
            }
        }
        Set<String> received = new TreeSet<>();
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
                .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL)).build()) {
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (!received.containsAll(sent) && System.currentTimeMillis() < deadline) {
                List<MessageView> views = consumer.receive(16, Duration.ofSeconds(30));
                for (MessageView view : views) {
                    String key = String.join(",", view.getKeys());
                    System.out.println("RECV " + key + " " + view.getMessageId());
                    received.add(key);
                    consumer.ack(view);
                }
            }
        }
        System.out.println("DONE sent=" + sent.size() + " received=" + received.size());
        System.exit(!sent.isEmpty() && received.containsAll(sent) ? 0 : 1);
    }
}
