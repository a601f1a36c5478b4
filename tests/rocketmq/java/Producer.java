import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * A DefaultMQProducer driven from stdin. Usage: Producer NAMESRV_ADDR GROUP TOPIC [--ak K --sk S] [--tls].
 * Prints "STARTED", then per stdin command:
 *   send N PREFIX   sends N messages with keys PREFIX-0..N-1, one line each:
 *                   "SENT key brokerName queueId msgId status" or "FAIL key exception: message",
 *                   then "DONE sent=X failed=Y"
 *   quit            shuts the producer down and exits.
 */
public class Producer {
    public static void main(String[] args) throws Exception {
        ClientOptions o = ClientOptions.parse(args);
        DefaultMQProducer producer = new DefaultMQProducer(o.arg(1), o.rpcHook());
        producer.setNamesrvAddr(o.arg(0));
        producer.setUseTLS(o.tls);
        producer.setSendMsgTimeout(5000);
        producer.setRetryTimesWhenSendFailed(3);
        producer.setInstanceName("producer-" + ProcessHandle.current().pid());
        producer.start();
        String topic = o.arg(2);
        System.out.println("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.trim().split("\\s+");
            if (cmd[0].equals("quit")) {
                break;
            }
            if (cmd[0].equals("send")) {
                int n = Integer.parseInt(cmd[1]);
                int sent = 0;
                int failed = 0;
                for (int i = 0; i < n; i++) {
                    String key = cmd[2] + "-" + i;
                    Message msg = new Message(topic, "test", key, ("body of " + key).getBytes(StandardCharsets.UTF_8));
                    try {
                        SendResult r = producer.send(msg);
                        System.out.println("SENT " + key + " " + r.getMessageQueue().getBrokerName() + " "
                            + r.getMessageQueue().getQueueId() + " " + r.getMsgId() + " " + r.getSendStatus());
                        sent++;
                    } catch (Exception e) {
                        System.out.println("FAIL " + key + " " + ClientOptions.oneLine(e));
                        failed++;
                    }
                }
                System.out.println("DONE sent=" + sent + " failed=" + failed);
            } else {
                System.out.println("ERROR unknown command " + line);
            }
        }
        producer.shutdown();
        System.out.println("BYE");
        System.exit(0);
    }
}
