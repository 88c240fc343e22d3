print("ddp-bridge")
