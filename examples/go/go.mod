module ddp-bridge/examples/sse-consumer

go 1.19
