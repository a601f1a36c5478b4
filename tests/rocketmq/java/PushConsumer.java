import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A DefaultMQPushConsumer (clustering, from the first offset) subscribed to TOPIC "*".
 * Usage: PushConsumer NAMESRV_ADDR GROUP TOPIC [--ak K --sk S] [--tls].
 * Prints "STARTED", then "RECV key brokerName queueId msgId" per message; stdin "quit" shuts it down.
 */
public class PushConsumer {
    public static void main(String[] args) throws Exception {
        ClientOptions o = ClientOptions.parse(args);
        DefaultMQPushConsumer consumer = o.rpcHook() == null
            ? new DefaultMQPushConsumer(o.arg(1))
            : new DefaultMQPushConsumer(o.arg(1), o.rpcHook(), new org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(o.arg(0));
        consumer.setUseTLS(o.tls);
        consumer.setInstanceName("consumer-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(o.arg(2), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                synchronized (System.out) {
                    System.out.println("RECV " + m.getKeys() + " " + m.getBrokerName() + " " + m.getQueueId() + " " + m.getMsgId());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        System.out.println("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("quit")) {
            if (line.trim().equals("rebalance")) {
                consumer.getDefaultMQPushConsumerImpl().doRebalance();
                System.out.println("REBALANCED");
            }
        }
        consumer.shutdown();
        System.out.println("BYE");
        System.exit(0);
    }
}
