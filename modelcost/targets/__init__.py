"""What an op runs on: hardware targets, their roofs and their interconnects."""
