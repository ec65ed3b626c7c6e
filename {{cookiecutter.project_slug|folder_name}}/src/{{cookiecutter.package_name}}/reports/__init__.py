"""What a run reports: metrics, pictures and the experiment tracker."""
