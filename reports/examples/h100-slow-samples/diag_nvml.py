import pynvml
while True:
    pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); pynvml.nvmlDeviceGetUUID(h); pynvml.nvmlShutdown()
