"""trainer.kubeflow.org/v1alpha1 (Kubeflow Trainer v2): TrainJob, TrainingRuntime, ClusterTrainingRuntime;
the TrainJob controller renders a JobSet as upstream's runtime framework does."""
