"""The only room with side effects: Hydra entry points, Ray, MLflow, files, plots, hardware."""
