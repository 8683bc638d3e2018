"""Select stage: the policies that cut a budget, the difficulty sources they rank by, and the one posterior."""
