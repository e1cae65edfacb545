"""The VeRL engine of aworld-train."""
