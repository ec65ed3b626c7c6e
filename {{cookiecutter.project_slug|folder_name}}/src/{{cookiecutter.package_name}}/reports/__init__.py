"""What a run reports: metrics and pictures, and to the experiment tracker where the project has one."""
