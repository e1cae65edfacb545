"""The Tinker engine of aworld-train: a LoRA adapter trained on a Tinker-API service (Thinking
Machines' cloud or a self-hosted SkyRL tx), with the agent, its tools and the reward on this
machine."""
