"""Placeholder demo: prints the Tessera version. (The real GEMM demo replaces this file.)"""

import tessera

print(f"tessera {tessera.__version__}")
