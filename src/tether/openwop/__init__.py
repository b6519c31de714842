"""The OpenWOP v1 REST surface: discovery, runs, events, interrupts."""
