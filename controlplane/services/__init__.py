"""State transitions and business rules, called from tasks, views and the API alike."""
